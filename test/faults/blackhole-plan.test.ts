import type * as Grpc from '@grpc/grpc-js';
import type { Server as GrpcServer } from '@grpc/grpc-js';
import type { ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:http';
import { connect, createServer as createNetServer, type Server as NetServer } from 'node:net';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, stopChild } from '../support/node.js';
import { createTestHost, type TestHost } from '../support/netns.js';
import { startPostgres, startRedis, type PostgresServer, type RedisServer } from '../support/databases.js';

// The seed system's test plan: blackhole the dependency, keep the probe port reachable; liveness
// must stay green for the whole fault. FAULT_SECONDS shortens it for a quick local run.
const FAULT_MS = Number(process.env.FAULT_SECONDS ?? 60) * 1_000;
const DEP_PORT = 18_080; // below the ephemeral range, so no probe reply ever matches the DROP rule
const DEP_GRPC_PORT = 18_081;
const DEP_PG_PORT = 18_082;
const DEP_REDIS_PORT = 18_083;
const PROBE_PORT = 5_555;
const INTERVAL_MS = 500;

interface Call {
  seq: number;
  deadline: number;
  started: number;
  ended: number;
  /** ms after the deadline the call ended, counted from when the service's event loop could act. */
  late: number;
  outcome: string;
}

let host: TestHost;
let dependency: Server;
let grpcDependency: GrpcServer;
let postgres: PostgresServer;
let redis: RedisServer;
const forwarders: NetServer[] = [];

beforeAll(async () => {
  host = createTestHost();
  dependency = createServer((_req, res) => res.end('ok'));
  dependency.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => dependency.listen(DEP_PORT, host.localIp, resolve));
  grpcDependency = await startHelloServer(`${host.localIp}:${String(DEP_GRPC_PORT)}`);
  // The database servers listen on loopback: reached from the test host through the link, so the
  // same DROP rule cuts them off.
  [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
  forwarders.push(await forward(host.localIp, DEP_PG_PORT, postgres.port), await forward(host.localIp, DEP_REDIS_PORT, redis.port));
}, 60_000);
afterAll(async () => {
  dependency.closeAllConnections();
  await new Promise((resolve) => dependency.close(resolve));
  grpcDependency.forceShutdown();
  for (const forwarder of forwarders) forwarder.close();
  await Promise.all([postgres.stop(), redis.stop()]);
  host.destroy();
});

/** A TCP forwarder on `ip:port` to a server on loopback `target`. */
async function forward(ip: string, port: number, target: number): Promise<NetServer> {
  const server = createNetServer((socket) => {
    const upstream = connect(target, '127.0.0.1');
    const close = () => {
      socket.destroy();
      upstream.destroy();
    };
    socket.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(port, ip, resolve));
  return server;
}

/** The gRPC dependency: answers Hello at once (JSON messages). */
async function startHelloServer(address: string): Promise<GrpcServer> {
  const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;
  const json = {
    requestSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
    requestDeserialize: (b: Buffer): unknown => JSON.parse(String(b)),
    responseSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
    responseDeserialize: (b: Buffer): unknown => JSON.parse(String(b)),
  };
  const server = new grpc.Server();
  server.addService(
    { Hello: { path: '/lifeline.Test/Hello', requestStream: false, responseStream: false, ...json } },
    {
      Hello: (_call: unknown, callback: Grpc.sendUnaryData<unknown>) => {
        callback(null, { hello: 'world' });
      },
    },
  );
  await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, port) => {
      if (error) reject(error);
      else resolve(port);
    });
  });
  return server;
}

/** Starts the service inside the test host; collects its call lines. */
function startService(env: NodeJS.ProcessEnv = {}): { child: ChildProcess; calls: Call[]; stderr: string[]; stop: () => Promise<void> } {
  const child = host.spawn(process.execPath, ['--import', 'otel-lifeline/register', `${ROOT}/test/fixtures/blackhole-service.mjs`], {
    DEP_URL: `http://${host.localIp}:${DEP_PORT}/status`,
    DEP_GRPC: `${host.localIp}:${DEP_GRPC_PORT}`,
    DEP_PG: `${host.localIp}:${DEP_PG_PORT}`,
    DEP_REDIS: `${host.localIp}:${DEP_REDIS_PORT}`,
    PG_USER: postgres.user,
    PG_PASSWORD: postgres.password,
    PG_DATABASE: postgres.database,
    LIFELINE_HEALTH_INTERVAL_MS: String(INTERVAL_MS),
    LIFELINE_PROBE_HOST: '0.0.0.0',
    LIFELINE_PROBE_PORT: String(PROBE_PORT),
    LIFELINE_LOG_LEVEL: 'warn',
    OTEL_TRACES_EXPORTER: 'none',
    ...env,
  });
  const calls: Call[] = [];
  // The service's call lines; lifeline's own log lines (a warning, JSON too) go to the same stdout.
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    const parsed = JSON.parse(line) as Partial<Call>;
    if (parsed.outcome !== undefined) calls.push(parsed as Call);
  });
  // Kept for a failure's message: CI shows the failure, not the stream before it.
  const stderr: string[] = [];
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr.push(chunk);
    process.stderr.write(`[service] ${chunk}`);
  });
  return { child, calls, stderr, stop: () => stopChild(child, 'SIGKILL') };
}

/**
 * Probes /live every 200 ms for `ms`; returns every status seen (0 = no answer within 1 s) and what
 * each failing answer said (which component, a blocked loop): what a red run needs to be explained.
 */
async function probeFor(ms: number): Promise<{ statuses: number[]; failures: string[] }> {
  const statuses: number[] = [];
  const failures: string[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const status = await fetch(`http://${host.ip}:${PROBE_PORT}/live`, { signal: AbortSignal.timeout(1_000) }).then(
      async (r) => {
        if (r.status !== 200) failures.push(`/live answered ${String(r.status)} at ${new Date().toISOString()}: ${await r.text()}`);
        return r.status;
      },
      (err: unknown) => {
        failures.push(`/live did not answer at ${new Date().toISOString()}: ${String(err)}`);
        return 0;
      },
    );
    statuses.push(status);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { statuses, failures };
}

/** Waits until /live answers 200 (at most 10 s). */
async function untilLive(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (
    (await fetch(`http://${host.ip}:${String(PROBE_PORT)}/live`, { signal: AbortSignal.timeout(1_000) }).then(
      (r) => r.status,
      () => 0,
    )) !== 200
  ) {
    if (Date.now() > deadline) throw new Error('timed out waiting for /live to answer 200');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function until(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Lateness of every call that ran inside the fault window (ms after its deadline). */
/**
 * Every call that ran inside the fault window ended by its deadline: ended by it (lateness ≤ 50 ms),
 * or, for gRPC, failed fast with UNAVAILABLE before it (grpc-js's own fail-fast once a connect
 * attempt has failed). Returns how many there were and the worst lateness.
 */
function assertAllEndedByDeadline(calls: Call[], from: number, to: number): { count: number; worstLateMs: number; failedFast: number } {
  const inFault = calls.filter((c) => c.started >= from && c.ended <= to);
  expect(inFault.length).toBeGreaterThan(FAULT_MS / INTERVAL_MS / 2);
  for (const call of inFault) {
    expect(['deadline', 'unavailable']).toContain(call.outcome);
    if (call.outcome === 'deadline') expect(call.ended).toBeGreaterThanOrEqual(call.deadline);
    expect(call.late).toBeLessThanOrEqual(50);
  }
  const byDeadline = inFault.filter((c) => c.outcome === 'deadline');
  return { count: inFault.length, worstLateMs: Math.max(...byDeadline.map((c) => c.late)), failedFast: inFault.length - byDeadline.length };
}

const CLIENTS = [
  { client: 'fetch', port: DEP_PORT, recoveryMs: 5_000 },
  { client: 'axios', port: DEP_PORT, recoveryMs: 5_000 },
  // A blackholed SYN is retransmitted by the kernel at growing intervals: a connect begun during
  // the blackhole completes up to ~15 s after the lift, then grpc-js's (short) backoff applies.
  { client: 'grpc', port: DEP_GRPC_PORT, recoveryMs: 30_000 },
  // The same for a new database connection; mid-flight, a query cut on a kept connection is
  // cancelled on a new one, which the blackhole also holds: the connection is retired.
  { client: 'pg', port: DEP_PG_PORT, recoveryMs: 30_000 },
  { client: 'ioredis', port: DEP_REDIS_PORT, recoveryMs: 30_000 },
] as const;

describe.each(CLIENTS)(
  `blackhole plan ($client): dependency blackholed for ${FAULT_MS / 1_000} s, 500 ms interval`,
  { timeout: FAULT_MS + 70_000 },
  ({ client, port, recoveryMs }) => {
    /** Blackholes the dependency for FAULT_MS, checks probes and calls, lifts it, waits for recovery. */
    async function blackholePhase(service: ReturnType<typeof startService>, label: string, alreadyUp = false): Promise<void> {
      const DEP_PORT = port;
      if (!alreadyUp) host.blackholeTo(host.localIp, DEP_PORT);
      try {
        const from = Date.now();
        const { statuses, failures } = await probeFor(FAULT_MS);
        const to = Date.now();
        expect(statuses.length).toBeGreaterThan(FAULT_MS / 400);
        // A red run explains itself: what failed, what the service said, its calls in the last seconds before.
        const firstFailure = failures.length === 0 ? 0 : Date.parse(/at (\S+?):? /.exec(failures[0] ?? '')?.[1] ?? '');
        const callsBefore = service.calls
          .filter((c) => c.ended >= firstFailure - 3_000 && c.started <= firstFailure)
          .map((c) => JSON.stringify(c));
        const around =
          failures.length === 0
            ? []
            : [
                ...failures,
                ...service.stderr
                  .join('')
                  .split('\n')
                  .slice(-20)
                  .map((line) => `[service] ${line}`),
                ...callsBefore,
              ];
        expect(around, 'every /live answer during the fault was 200').toEqual([]);
        const { count, worstLateMs, failedFast } = assertAllEndedByDeadline(service.calls, from, to);
        host.liftTo(host.localIp, DEP_PORT);
        const lifted = Date.now();
        await until(
          () => service.calls.some((c) => c.started > to && c.outcome === 'ok'),
          recoveryMs,
          'a successful call after the blackhole',
        );
        console.log(
          `${client} ${label}: ${statuses.length} probes all 200; ${count} calls ended by their deadline (${failedFast} failed fast, UNAVAILABLE), worst ${worstLateMs} ms after it; recovered ${Date.now() - lifted} ms after the lift`,
        );
      } finally {
        try {
          host.liftTo(host.localIp, port);
        } catch {
          // already lifted
        }
      }
    }

    it('(a) before any connection exists (connect phase): liveness 200 throughout, every call ends at its deadline, recovers', async () => {
      // The blackhole goes up before the service starts: its first connect already meets it.
      host.blackholeTo(host.localIp, port);
      const service = startService({ CLIENT: client });
      try {
        await until(() => service.calls.length > 0, 10_000, 'the first call');
        // A component is unhealthy until a round sees it take a tick: the first call ends at its
        // deadline, the same instant as that round, which may come a few ms after. The fault window
        // starts once the service says it is healthy (CI probed in between and got that 503).
        await untilLive();
        await blackholePhase(service, 'connect phase', true);
      } finally {
        await service.stop();
      }
    });

    it('(b) mid-flight, on kept-alive connections: liveness 200 throughout, every call ends at its deadline, recovers', async () => {
      const service = startService({ CLIENT: client });
      try {
        await until(() => service.calls.filter((c) => c.outcome === 'ok').length >= 3, 10_000, 'three successful calls');
        await blackholePhase(service, 'mid-flight');
      } finally {
        await service.stop();
      }
    });
  },
);

describe('blackhole plan, contrast', { timeout: 40_000 }, () => {
  it('contrast: the same service without lifeline deadlines turns unhealthy under the blackhole', async () => {
    const service = startService({ CONTRAST: '1' });
    try {
      await until(() => service.calls.filter((c) => c.outcome === 'ok').length >= 2, 10_000, 'two successful calls');
      host.blackholeTo(host.localIp, DEP_PORT);
      const { statuses, failures } = await probeFor(5_000);
      for (const failure of failures) console.log(failure);
      expect(statuses).toContain(503);
      console.log(`contrast: liveness answered 503 ${statuses.filter((s) => s === 503).length} of ${statuses.length} times in 5 s`);
    } finally {
      host.liftTo(host.localIp, DEP_PORT);
      await service.stop();
    }
  });
});
