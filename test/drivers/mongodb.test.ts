import { createHook } from 'node:async_hooks';
import { createRequire } from 'node:module';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureContextManager } from '../../src/deadline/index.js';
import { installMongoDeadlines } from '../../src/drivers/mongodb/index.js';
import type { Installed } from '../../src/install/index.js';
import { isDeadlineExceeded, withTimeout } from '../../src/index.js';
import { lateness } from '../support/clients.js';
import { startMongo, type MongoServer } from '../support/mongo.js';

/**
 * The MongoDB driver (7) under lifeline, against a real MongoDB wire-protocol server (FerretDB on
 * SQLite): a slow query ends at its deadline for the caller, the server was told the budget as
 * `maxTimeMS` and stops working on it, the pool stays whole; server selection and a wait for a
 * pooled connection end at the deadline too.
 */
const DEADLINE_MS = 300;
/** How late past its deadline a cut call may end: scheduling on a loaded 2-core machine, not a hang. */
const LATE_MS = 50;
/** Documents in the slow collection: a filter FerretDB cannot push down to SQLite scans them all in Go (~2.5 s for 30 000). */
const DOCUMENTS = 30_000;
/** No document matches it, and FerretDB evaluates it row by row. */
const SLOW_FILTER = { i: { $mod: [7, 8] } };

const require = createRequire(import.meta.url);
type Mongo = typeof import('mongodb');
// Loaded before lifeline's install: the install patches copies already in require's cache too.
const mongodb = require('mongodb') as Mongo;
const executeModule = require('mongodb/lib/operations/execute_operation.js') as { executeOperation: unknown };
const connectionModule = require('mongodb/lib/cmap/connection.js') as { Connection: { prototype: { command: unknown } } };
const originals = { executeOperation: executeModule.executeOperation, command: connectionModule.Connection.prototype.command };

let server: MongoServer;
let deadlines: Installed;
let client: InstanceType<Mongo['MongoClient']>;
/** The commands the client sent, by command monitoring. */
const started: { commandName: string; command: Record<string, unknown> }[] = [];

beforeAll(async () => {
  ensureContextManager();
  server = await startMongo();
  const setup = new mongodb.MongoClient(server.uri);
  try {
    const slow = setup.db('lifeline').collection<{ _id: number; i: number; s: string }>('slow');
    await slow.drop().catch(() => undefined);
    for (let from = 0; from < DOCUMENTS; from += 5_000)
      await slow.insertMany(Array.from({ length: 5_000 }, (_, k) => ({ _id: from + k, i: from + k, s: 'x'.repeat(100) })));
    await setup.db('lifeline').collection<{ _id: number; n: number }>('small').insertOne({ _id: 1, n: 1 });
  } finally {
    await setup.close();
  }
  deadlines = installMongoDeadlines({
    policy: [{ match: { 'db.system.name': 'mongodb', 'db.operation.name': 'aggregate' }, timeoutMs: 200 }],
  });
  client = new mongodb.MongoClient(server.uri, { monitorCommands: true, maxPoolSize: 2 });
  client.on('commandStarted', (event) => started.push({ commandName: event.commandName, command: event.command }));
  await client.connect();
}, 120_000);
afterAll(async () => {
  // Each set in beforeAll, which may have failed before it.
  const setUp = { deadlines, client, server } as Partial<{
    deadlines: Installed;
    client: typeof client;
    server: MongoServer;
  }>;
  setUp.deadlines?.uninstall();
  await setUp.client?.close();
  await setUp.server?.stop();
});

const slow = () => client.db('lifeline').collection('slow');
const small = () => client.db('lifeline').collection<{ _id: number; n: number }>('small');

/** The server's CPU time over `ms`. */
async function serverCpuOver(ms: number): Promise<number> {
  const before = server.cpuMs();
  await new Promise((resolve) => setTimeout(resolve, ms));
  return server.cpuMs() - before;
}

/**
 * True once the server is idle (under 50 ms of CPU in a 250 ms window: a scan burns a core), within
 * `ms`. FerretDB's `currentOp` always answers an empty list, so its CPU time is what shows work.
 */
async function serverIdleWithin(ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  for (;;) {
    if ((await serverCpuOver(250)) < 50) return true;
    if (performance.now() > until) return false;
  }
}

/** The pool serves 20 operations, two connections at a time. */
async function poolServes20(): Promise<void> {
  const found = await Promise.all(Array.from({ length: 20 }, () => small().findOne({ _id: 1 })));
  expect(found.map((doc) => doc?.n)).toEqual(Array.from({ length: 20 }, () => 1));
}

describe('mongodb: ended at the deadline, on the server too', () => {
  it('a slow find: the caller is freed at the deadline, the server got maxTimeMS and stops, the pool serves 20 after', async () => {
    const { error, lateMs } = await lateness(DEADLINE_MS, () => slow().find(SLOW_FILTER).toArray());
    expect(isDeadlineExceeded(error), String(error)).toBe(true);
    expect(lateMs).toBeLessThan(LATE_MS);
    const find = started.findLast((event) => event.commandName === 'find');
    expect(find?.command.maxTimeMS).toBeGreaterThan(DEADLINE_MS - 100);
    expect(find?.command.maxTimeMS).toBeLessThanOrEqual(DEADLINE_MS);
    expect(await serverIdleWithin(1_000)).toBe(true);
    await poolServes20();
  });

  it('a policy rule bounds an aggregate no context deadline bounds', async () => {
    const startedAt = performance.now();
    const error = await slow()
      .aggregate([{ $match: SLOW_FILTER }])
      .toArray()
      .catch((e: unknown) => e);
    const tookMs = performance.now() - startedAt;
    expect(isDeadlineExceeded(error), String(error)).toBe(true);
    expect(tookMs).toBeGreaterThanOrEqual(195);
    expect(tookMs).toBeLessThan(200 + LATE_MS + 50); // no control timer here: event-loop lag counts
    expect(started.findLast((event) => event.commandName === 'aggregate')?.command.maxTimeMS).toBeLessThanOrEqual(200);
    expect(await serverIdleWithin(1_000)).toBe(true);
  });

  it("the caller's smaller maxTimeMS stays", async () => {
    await withTimeout(10_000, () => small().find({}).maxTimeMS(1_234).toArray());
    expect(started.findLast((event) => event.commandName === 'find')?.command.maxTimeMS).toBe(1_234);
  });

  it('waiting for a pooled connection ends at the deadline, and the pool serves 20 after', async () => {
    const one = new mongodb.MongoClient(server.uri, { maxPoolSize: 1 });
    try {
      await one.connect();
      // Holds the only connection for ~2.5 s, under no deadline.
      const holder = one.db('lifeline').collection('slow').find(SLOW_FILTER).toArray();
      const { error, lateMs } = await lateness(DEADLINE_MS, () =>
        one.db('lifeline').collection<{ _id: number; n: number }>('small').findOne({ _id: 1 }),
      );
      expect(isDeadlineExceeded(error), String(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await holder).toEqual([]); // the holder was not bounded, and ran to its end
    } finally {
      await one.close();
    }
    await poolServes20();
  });

  it('server selection with no server up ends at the deadline', async () => {
    // A port that accepts and never answers the handshake: the server is never selectable.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const unreachable = new mongodb.MongoClient(`mongodb://127.0.0.1:${String(port)}/?directConnection=true`, {
      serverSelectionTimeoutMS: 30_000,
    });
    try {
      const { error, lateMs } = await lateness(DEADLINE_MS, () =>
        unreachable.db('lifeline').collection<{ _id: number; n: number }>('small').findOne({ _id: 1 }),
      );
      expect(isDeadlineExceeded(error), String(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
    } finally {
      for (const socket of sockets) socket.destroy();
      await unreachable.close();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

describe('mongodb: operations that end first', () => {
  it('leave no timer behind', async () => {
    await withTimeout(60_000, () => small().findOne({ _id: 1 }));
    // Deadline timers are the Timeouts of exactly our 60 s budget: each must be cleared by its operation's end.
    const live = new Set<number>();
    let created = 0;
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
      for (let i = 0; i < 50; i++) expect((await withTimeout(60_000, () => small().findOne({ _id: 1 })))?.n).toBe(1);
      // A deadline's timer stops at the end of the turn its last operation ended in; its destroy is told a turn later.
      for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    } finally {
      hook.disable();
    }
    expect(created).toBe(50);
    expect(live.size).toBe(0);
  });
});

describe('mongodb: uninstall', () => {
  it('restores the driver: no maxTimeMS, no deadline', async () => {
    deadlines.uninstall();
    try {
      expect(executeModule.executeOperation).toBe(originals.executeOperation);
      expect(connectionModule.Connection.prototype.command).toBe(originals.command);
      const doc = await withTimeout(DEADLINE_MS, () => small().findOne({ _id: 1 }));
      expect(doc?.n).toBe(1);
      expect(started.findLast((event) => event.commandName === 'find')?.command.maxTimeMS).toBeUndefined();
    } finally {
      deadlines = installMongoDeadlines();
    }
  });
});
