import { SpanStatusCode, trace } from '@opentelemetry/api';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { RedisInstrumentation } from '@opentelemetry/instrumentation-redis';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { createServer, type Server, type Socket } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDeadlineExceeded, withTimeout } from '../../src/index.js';
import type { Lifeline } from '../../src/sdk/index.js';
import { lateness } from '../support/clients.js';
import { eventually, startRedis, type RedisServer } from '../support/databases.js';
import { freePort } from '../support/node.js';
import { endedClientSpan, startInMemoryLifeline } from '../support/tracing.js';

/**
 * ioredis and node-redis under lifeline, against a real Redis 7: a command blocked on the server
 * (BLPOP key 0, XREAD BLOCK 0) ends at its deadline for the caller, the server stops blocking the
 * connection just after it, and the connection answers the commands behind it with their own replies.
 */
const DEADLINE_MS = 300;
/** How late past its deadline a cut call may end: scheduling on a loaded 2-core machine, not a hang. */
const LATE_MS = 50;
const MIB = 1024 * 1024;

const require = createRequire(import.meta.url);
let server: RedisServer;
let lifeline: Lifeline;
const exporter = new InMemorySpanExporter();

/** One Redis client as a test drives it. */
interface Connection {
  blpop(key: string, seconds: number): Promise<unknown>;
  brpop(key: string, seconds: number): Promise<unknown>;
  xreadForever(stream: string): Promise<unknown>;
  set(key: string, value: string): Promise<unknown>;
  get(key: string): Promise<unknown>;
  /** Commands still queued to be written (ioredis' offline queue), when the client says. */
  offline(): number | undefined;
  close(): void;
}
interface Driver {
  readonly name: string;
  /** node-redis writes the commands queued while it connects right behind its handshake. */
  readonly writesBehindHandshake: boolean;
  /** The pattern of its client spans' `db.operation.name` for a command. */
  readonly operation: (command: string) => string;
  /** A client of the server on `port`; unless `ready`, not waiting for it to be connected (retrying every 50 ms). */
  connect(port: number, ready?: boolean): Promise<Connection>;
}

const ioredisDriver: Driver = {
  name: 'ioredis',
  writesBehindHandshake: false,
  operation: (command) => command.toLowerCase(),
  async connect(port, ready = true) {
    const Redis = require('ioredis') as typeof import('ioredis').default;
    const redis = new Redis({ host: server.host, port, lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 });
    redis.on('error', () => undefined);
    if (ready) await redis.connect();
    else redis.connect().catch(() => undefined);
    return {
      blpop: (key, seconds) => redis.blpop(key, seconds),
      brpop: (key, seconds) => redis.brpop(key, seconds),
      xreadForever: (stream) => redis.xread('BLOCK', 0, 'STREAMS', stream, '$'),
      set: (key, value) => redis.set(key, value),
      get: (key) => redis.get(key),
      offline: () => (redis as unknown as { offlineQueue: { length: number } }).offlineQueue.length,
      close: () => {
        redis.disconnect();
      },
    };
  },
};

const nodeRedisDriver: Driver = {
  name: 'node-redis',
  writesBehindHandshake: true,
  operation: (command) => command.toUpperCase(),
  async connect(port, ready = true) {
    const { createClient } = require('redis') as typeof import('redis');
    const client = createClient({ socket: { host: server.host, port, reconnectStrategy: () => 50 } });
    client.on('error', () => undefined);
    const connecting = client.connect();
    if (ready) await connecting;
    else connecting.catch(() => undefined);
    return {
      blpop: (key, seconds) => client.blPop(key, seconds),
      brpop: (key, seconds) => client.brPop(key, seconds),
      xreadForever: (stream) => client.xRead({ key: stream, id: '$' }, { BLOCK: 0 }),
      set: (key, value) => client.set(key, value),
      get: (key) => client.get(key),
      offline: () => undefined,
      close: () => {
        client.destroy();
      },
    };
  },
};

beforeAll(async () => {
  server = await startRedis();
  lifeline = await startInMemoryLifeline(exporter, {
    instrumentations: [new IORedisInstrumentation(), new RedisInstrumentation({ requireParentSpan: true })],
    deadlines: { policy: [{ match: { 'db.system.name': 'redis', 'db.operation.name': 'BRPOP' }, timeoutMs: 200 }] },
  });
}, 60_000);
afterAll(async () => {
  // Either is missing when beforeAll failed part-way.
  await (lifeline as Lifeline | undefined)?.shutdown();
  await (server as RedisServer | undefined)?.stop();
});

/** Clients the server has blocked in a command (INFO clients' blocked_clients). */
async function blockedClients(): Promise<number> {
  const info = String(await server.admin(['INFO', 'clients']));
  return Number(/blocked_clients:(\d+)/.exec(info)?.[1] ?? NaN);
}

/** CLIENT LIST lines of clients blocked (flag b) in `command`. */
async function blockedIn(command: string): Promise<number> {
  const list = String(await server.admin(['CLIENT', 'LIST']));
  return list.split('\n').filter((line) => / flags=\S*b/.test(line) && line.includes(` cmd=${command} `)).length;
}

/** 20 SETs of distinct values, then their GETs: each reply is its own command's, none shifted. */
async function answersInOrder(connection: Connection, prefix: string): Promise<void> {
  const keys = Array.from({ length: 20 }, (_, i) => `${prefix}:${String(i)}`);
  const sets = await Promise.all(keys.map((key, i) => connection.set(key, `v${String(i)}`)));
  expect(sets).toEqual(keys.map(() => 'OK'));
  expect(await Promise.all(keys.map((key) => connection.get(key)))).toEqual(keys.map((_, i) => `v${String(i)}`));
}

/** A server that accepts connections and never answers (a hung Redis, a blackholed proxy). */
async function silentServer(port = 0): Promise<{ port: number; received: () => string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let received = '';
  const silent: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => silent.listen(port, '127.0.0.1', resolve));
  const address = silent.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    port: address.port,
    received: () => received,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        silent.close(() => {
          resolve();
        });
      }),
  };
}

describe.each([ioredisDriver, nodeRedisDriver])('$name: ended at the deadline, on the server too', (driver) => {
  it.each([
    ['BLPOP key 0', 'blpop', (c: Connection, key: string) => c.blpop(key, 0)],
    ['XREAD BLOCK 0', 'xread', (c: Connection, key: string) => c.xreadForever(key)],
  ] as const)(
    '%s: the caller gets DeadlineExceededError at the deadline, the server unblocks, the connection answers in order',
    async (_, command, call) => {
      const connection = await driver.connect(server.port);
      try {
        const key = `${driver.name}:${command}:${String(Date.now())}`;
        let blockedMidway = -1;
        const midway = setTimeout(() => {
          void blockedIn(command).then((n) => (blockedMidway = n));
        }, DEADLINE_MS / 2);
        const { error, lateMs } = await lateness(DEADLINE_MS, () => call(connection, key));
        clearTimeout(midway);
        expect(isDeadlineExceeded(error)).toBe(true);
        expect(lateMs).toBeLessThan(LATE_MS);
        // It was blocked on the server (the test sees a blocked command), and is no longer within 1 s.
        expect(blockedMidway).toBe(1);
        expect(await eventually(async () => (await blockedIn(command)) === 0 && (await blockedClients()) === 0, 1_000)).toBe(true);
        await answersInOrder(connection, key);
      } finally {
        connection.close();
      }
    },
  );

  it('a command answered first leaves no timer behind, and gets its reply', async () => {
    const connection = await driver.connect(server.port);
    try {
      const key = `${driver.name}:timer:${String(Date.now())}`;
      await connection.set(key, 'plain');
      const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      // The driver's own timers (node-redis' command timeout) counted without a deadline first.
      await connection.get(key);
      const without = timers();
      expect(await withTimeout(5_000, () => connection.get(key))).toBe('plain');
      expect(timers()).toBeLessThanOrEqual(without);
    } finally {
      connection.close();
    }
  });

  it('a server that accepts and never answers (the handshake unanswered): the command rejects at its deadline', async () => {
    const silent = await silentServer();
    const connection = await driver.connect(silent.port, false);
    try {
      const { error, lateMs } = await lateness(DEADLINE_MS, () => connection.get('never'));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(silent.received()).toMatch(driver.writesBehindHandshake ? /HELLO/ : /INFO/);
      // ioredis holds it in its offline queue, which it leaves: never sent. node-redis wrote it
      // behind its handshake: its reply, if one ever comes, is discarded.
      if (!driver.writesBehindHandshake) {
        expect(connection.offline()).toBe(0);
        expect(silent.received()).not.toMatch(/GET/);
      }
    } finally {
      connection.close();
      await silent.close();
    }
  });

  it('reconnecting (nothing listens yet): the queued command rejects at its deadline and is not sent once a server listens', async () => {
    const port = await freePort();
    const connection = await driver.connect(port, false);
    let silent: Awaited<ReturnType<typeof silentServer>> | undefined;
    try {
      const { error, lateMs } = await lateness(DEADLINE_MS, () => connection.get('offline'));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(connection.offline() ?? 0).toBe(0);
      silent = await silentServer(port);
      const listening = silent;
      // The client connects and sends its handshake; the command the deadline ended is not sent.
      expect(await eventually(() => Promise.resolve(/HELLO|INFO/.test(listening.received())), 5_000)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(listening.received()).not.toMatch(/GET/);
    } finally {
      connection.close();
      await silent?.close();
    }
  });

  it('a policy rule on db.operation.name bounds BRPOP (200 ms), and only it: BLPOP keeps its own 0.5 s', async () => {
    const connection = await driver.connect(server.port);
    try {
      const key = `${driver.name}:rule:${String(Date.now())}`;
      let started = performance.now();
      const error = await connection.brpop(key, 5).catch((err: unknown) => err);
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(performance.now() - started).toBeLessThan(200 + LATE_MS + 100);
      expect(await eventually(async () => (await blockedClients()) === 0, 1_000)).toBe(true);
      started = performance.now();
      expect(await connection.blpop(key, 0.5)).toBeNull();
      expect(performance.now() - started).toBeGreaterThanOrEqual(450);
    } finally {
      connection.close();
    }
  });

  it('the client span is marked: error.type timeout, lifeline.deadline.exceeded', async () => {
    const connection = await driver.connect(server.port);
    try {
      const key = `${driver.name}:span:${String(Date.now())}`;
      exporter.reset();
      const tracer = trace.getTracer('redis-test');
      await tracer.startActiveSpan('parent', async (parent) => {
        await withTimeout(DEADLINE_MS, () => connection.blpop(key, 0)).catch(() => undefined);
        parent.end();
      });
      const span = await endedClientSpan(
        () => exporter.getFinishedSpans(),
        (s) => String(s.attributes['db.operation.name']) === driver.operation('blpop'),
      );
      expect(span?.attributes).toMatchObject({
        'error.type': 'timeout',
        'lifeline.deadline.exceeded': true,
        'lifeline.deadline.source': 'scope',
      });
      expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    } finally {
      connection.close();
    }
  });

  it('100,000 deadline-bound GET/SET in batches of 1,000: no retained heap growth, no MaxListenersExceeded warning', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = (): number => {
      gc();
      gc();
      return process.memoryUsage().heapUsed;
    };
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => {
      warnings.push(`${warning.name}: ${warning.message}`);
    };
    process.on('warning', onWarning);
    const connection = await driver.connect(server.port);
    try {
      const key = `${driver.name}:many`;
      const batch = async (round: number): Promise<void> => {
        const replies = await withTimeout(10_000, () =>
          Promise.all(Array.from({ length: 1_000 }, (_, i) => (i % 2 === 0 ? connection.set(key, String(round)) : connection.get(key)))),
        );
        expect(replies.length).toBe(1_000);
      };
      for (let round = 0; round < 10; round++) await batch(round); // warm-up: the driver's and V8's one-time allocations
      exporter.reset();
      const before = heap();
      for (let round = 0; round < 100; round++) await batch(round);
      // node-redis' own command timeout (5 s by default) holds an AbortSignal.timeout per command until it fires.
      await new Promise((resolve) => setTimeout(resolve, 5_500));
      const grown = heap() - before;
      expect(exporter.getFinishedSpans()).toEqual([]); // no parent span: the instrumentations record nothing to hold
      console.log(`${driver.name}: 100,000 deadline-bound commands, retained heap growth ${(grown / MIB).toFixed(2)} MiB`);
      // A command's lifeline state (timer, closures, abort controller) is ~0.5-1 KiB: keeping it
      // for every command would retain 50-100 MiB. 8 MiB is far under that and over GC noise.
      expect(grown).toBeLessThan(8 * MIB);
      expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      connection.close();
    }
  }, 120_000);
});
