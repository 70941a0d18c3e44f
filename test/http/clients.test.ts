import { SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { createHook } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { createConnection } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDeadlineExceeded, withTimeout } from '../../src/index.js';
import type { Lifeline } from '../../src/sdk/index.js';
import { lateness, type Client } from '../support/clients.js';
import { CUT_BOUND_MS } from '../support/cut.js';
import {
  answersOk,
  neverAnswers,
  selfSignedCertificate,
  serve,
  serveTls,
  stallsBody,
  stallsHandshake,
  type TestServer,
} from '../support/servers.js';
import { endedClientSpan, startInMemoryLifeline } from '../support/tracing.js';
import { afterThisTurn } from '../support/turns.js';

/**
 * Every HTTP client a Node service uses, against real loopback servers that stall in each phase,
 * under a deadline: the call ends at the deadline with an error `isDeadlineExceeded` recognises
 * through the client's own wrapping, and its client span says so. (The blackholed connect phase is
 * in test/faults, which needs network namespaces.)
 */
const DEADLINE_MS = 300;

// Loaded once the SDK runs, as in a service under `--import otel-lifeline/register`: OpenTelemetry's http
// instrumentation patches node:http when a client requires it after the SDK started.
let CLIENTS: Readonly<Record<string, Client>> = {};
const NODE_HTTP_CLIENTS = ['node:http(s)', 'axios', 'got', 'node-fetch@2', '@aws-sdk/client-s3'] as const;
const exporter = new InMemorySpanExporter();
let lifeline: Lifeline;
const servers: Record<string, TestServer> = {};
const policyHeaders: string[] = [];
beforeAll(async () => {
  servers.policy = await serve((req, res) => {
    policyHeaders.push(String(req.headers['x-request-timeout-ms']));
    res.end('ok');
  });
  lifeline = await startInMemoryLifeline(exporter, {
    deadlines: { policy: [{ match: { 'server.port': servers.policy.port }, timeoutMs: 1_500 }] },
  });
  // A CommonJS require of the core modules after the SDK started lets its hook patch them, as
  // register mode's loader hook does for an ES module's imports.
  createRequire(import.meta.url)('node:http');
  createRequire(import.meta.url)('node:https');
  const clients = await import('../support/clients.js');
  CLIENTS = clients.CLIENTS;
  const credentials = selfSignedCertificate();
  clients.tls.ca = credentials.cert;
  servers.head = await serve(neverAnswers);
  servers.body = await serve(stallsBody);
  servers.ok = await serve(answersOk);
  servers.tlsHead = await serveTls(credentials, neverAnswers);
  servers.tlsBody = await serveTls(credentials, stallsBody);
  servers.handshake = await stallsHandshake();
  // Each client's abort path once, cold: the first abort in a process compiles its code paths.
  await Promise.all(
    Object.values(CLIENTS).map((call) => withTimeout(20, () => call(`${servers.head?.url ?? ''}/warm-up`)).catch(() => undefined)),
  );
});
afterAll(async () => {
  await Promise.all(Object.values(servers).map((s) => s.close()));
  await lifeline.shutdown();
});

const underDeadline = (call: () => Promise<unknown>) => lateness(DEADLINE_MS, call);

/** The client span of the call to `port`, once it has ended. */
const clientSpan = (port: number | undefined) =>
  endedClientSpan(
    () => exporter.getFinishedSpans(),
    (s) => s.attributes['server.port'] === port,
  );

const HTTPS_CLIENTS = NODE_HTTP_CLIENTS; // fetch and undici.request cannot trust a self-signed CA without a dispatcher of their own
const cases: [client: string, phase: string, server: string, path: string][] = [
  ...['global fetch', 'undici.request', ...NODE_HTTP_CLIENTS].flatMap((client) => [
    [client, 'waiting for the response head', 'head', '/head'] as [string, string, string, string],
    [client, 'streaming a body that stalls', 'body', '/body'] as [string, string, string, string],
    [client, 'in a TLS handshake that never completes', 'handshake', '/handshake'] as [string, string, string, string],
  ]),
  ...HTTPS_CLIENTS.flatMap((client) => [
    [client, 'over TLS, waiting for the response head', 'tlsHead', '/head'] as [string, string, string, string],
    [client, 'over TLS, streaming a body that stalls', 'tlsBody', '/body'] as [string, string, string, string],
  ]),
];

describe.each(cases)('%s %s', (client, _phase, server, path) => {
  it('ends at the deadline with a recognised error, and its client span says so', async () => {
    const call = CLIENTS[client];
    const target = servers[server];
    if (call === undefined || target === undefined) throw new Error(`${client} ${server}`);
    const { error, lateMs } = await underDeadline(() => call(`${target.url}${path}`));
    expect(isDeadlineExceeded(error), String(error)).toBe(true);
    // Never early; late only by a loaded machine's scheduling, never by a hang (these servers never answer).
    expect(lateMs).toBeGreaterThanOrEqual(0);
    expect(lateMs).toBeLessThan(CUT_BOUND_MS);
    const span = await clientSpan(target.port);
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(span?.attributes['error.type']).toBe('timeout');
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.attributes['lifeline.deadline.source']).toBe('scope');
  });
});

describe.each(NODE_HTTP_CLIENTS)('%s under a deadline already passed', (client) => {
  it('fails with the deadline error, and the request never reaches a fast server, even on a kept-alive connection', async () => {
    const call = CLIENTS[client] as Client;
    const url = `${servers.ok?.url ?? ''}/passed`;
    await withTimeout(5_000, () => call(url)); // a kept-alive connection, where the client keeps one
    const seen = servers.ok?.requests() ?? 0;
    for (let i = 0; i < 10; i++) {
      const { error } = await lateness(-1, () => call(url));
      expect(isDeadlineExceeded(error) || isDeadlineExceeded((error as { cause?: unknown }).cause)).toBe(true);
    }
    expect(servers.ok?.requests()).toBe(seen);
  });
});

describe.each(NODE_HTTP_CLIENTS)('%s queued in an http.Agent with maxSockets reached', (client) => {
  it('ends at the deadline; the agent serves the next call normally', async () => {
    const call = CLIENTS[client];
    const head = servers.head;
    const ok = servers.ok;
    if (call === undefined || head === undefined || ok === undefined) throw new Error(client);
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    try {
      // The one socket is taken by a call that waits for its deadline 2 s out.
      let blockerEnded = false;
      const blocker = withTimeout(2_000, () => call(`${head.url}/blocker`, { agent })).catch((e: unknown) => {
        blockerEnded = true;
        return e;
      });
      const { error } = await underDeadline(() => call(`${head.url}/queued`, { agent }));
      expect(isDeadlineExceeded(error), String(error)).toBe(true);
      expect(blockerEnded).toBe(false); // its own deadline ended it, not the socket the blocker freed
      expect(agent.requests).toEqual({}); // out of the queue, which is gone as the agent would leave it
      expect(isDeadlineExceeded(await blocker)).toBe(true);
      // The blocker's socket was destroyed by its deadline, not handed back to the pool.
      expect(Object.values(agent.freeSockets).flat()).toEqual([]);
      expect(await withTimeout(5_000, () => call(`${ok.url}/after`, { agent }))).toBe('ok');
    } finally {
      agent.destroy();
    }
  });
});

describe('a socket made asynchronously (a proxy tunnel, an agent-base agent)', () => {
  it('ends at the deadline, not when the socket arrives; the late socket is destroyed quietly', async () => {
    const head = servers.head;
    if (head === undefined) throw new Error('setup');
    // An agent whose connection takes 1 s to appear, as a tunnel through a slow proxy does.
    let lateSocket: import('node:net').Socket | undefined;
    class SlowAgent extends HttpAgent {
      override createConnection(options: object, callback?: (err: Error | null, socket: import('node:net').Socket) => void): undefined {
        setTimeout(() => {
          lateSocket = createConnection(options as import('node:net').NetConnectOpts);
          callback?.(null, lateSocket);
        }, 1_000);
        return undefined;
      }
    }
    const agent = new SlowAgent();
    const events: string[] = [];
    let socketBeforeError: boolean | undefined;
    try {
      const { error } = await lateness(
        DEADLINE_MS,
        () =>
          new Promise((resolve, reject) => {
            const request = httpRequest(`${head.url}/tunnel`, { agent }, resolve);
            request.on('error', (e) => {
              events.push('error');
              socketBeforeError = lateSocket !== undefined;
              reject(e);
            });
            request.on('close', () => events.push('close'));
            request.end();
          }),
      );
      expect(isDeadlineExceeded(error), String(error)).toBe(true);
      expect(socketBeforeError).toBe(false); // at the deadline, not when the socket came
      await new Promise((resolve) => setTimeout(resolve, 1_200)); // the socket arrives after 1 s
      expect(lateSocket?.destroyed).toBe(true);
      expect(events).toEqual(['error', 'close']);
    } finally {
      agent.destroy();
    }
  });
});

describe('calls that end before their deadline', () => {
  it.each(NODE_HTTP_CLIENTS)('%s: no timer and no listener left behind; keep-alive sockets reused', async (client) => {
    const call = CLIENTS[client];
    const ok = servers.ok;
    if (call === undefined || ok === undefined) throw new Error(client);
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 4 });
    try {
      await withTimeout(5_000, () => call(`${ok.url}/warm`, { agent }));
      // Deadline timers are the Timeouts of exactly our 60 s budget: each must be cleared by its call's end.
      const live = new Set<number>();
      let created = 0;
      let free = 0;
      const hook = createHook({
        init(id, type, _trigger, resource) {
          const idle = (resource as { _idleTimeout?: number })._idleTimeout ?? 0;
          if (type !== 'Timeout' || idle <= 59_000 || idle > 60_000) return;
          created++;
          live.add(id);
        },
        destroy(id) {
          live.delete(id);
        },
      }).enable();
      try {
        for (let i = 0; i < 50; i++) expect(await withTimeout(60_000, () => call(`${ok.url}/${String(i)}`, { agent }))).toBe('ok');
        // Counted now: a client's destroy() may close its agent's sockets a turn later (@aws-sdk's does).
        await new Promise((resolve) => setImmediate(resolve));
        free = Object.values(agent.freeSockets).flat().length;
        await afterThisTurn();
      } finally {
        hook.disable();
      }
      expect(created).toBe(50);
      expect(live.size).toBe(0);
      expect(free).toBe(1); // one connection, reused 50 times
    } finally {
      agent.destroy();
    }
  });

  it('a policy deadline on a node:http call is recorded on its span and sent downstream', async () => {
    const target = servers.policy;
    const call = CLIENTS['node:http(s)'];
    if (target === undefined || call === undefined) throw new Error('setup');
    exporter.reset();
    expect(await call(`${target.url}/policy`)).toBe('ok');
    const span = await clientSpan(target.port);
    expect(span?.attributes['lifeline.deadline.source']).toBe('policy');
    expect(span?.attributes['lifeline.deadline.missing']).toBe(false);
    expect(Number(policyHeaders[0])).toBeGreaterThan(1_000);
    expect(Number(policyHeaders[0])).toBeLessThanOrEqual(1_500);
  });
});
