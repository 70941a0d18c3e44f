import { SpanStatusCode } from '@opentelemetry/api';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentDeadline, isDeadlineExceeded, withTimeout } from '../../src/index.js';
import type { Lifeline } from '../../src/sdk/index.js';
import { lateness } from '../support/clients.js';
import { eventually, pgRunning, startPostgres, type PostgresServer } from '../support/databases.js';
import { endedClientSpan, startInMemoryLifeline } from '../support/tracing.js';

/**
 * node-postgres under lifeline, against a real PostgreSQL: each way a query gets stuck (a row
 * lock, a slow statement, an exhausted pool) ends at its deadline for the caller, the server stops
 * running it, and the pool stays whole.
 */
const DEADLINE_MS = 300;
/** How late past its deadline a cut call may end: scheduling on a loaded 2-core machine, not a hang. */
const LATE_MS = 50;

const require = createRequire(import.meta.url);
type Pg = typeof import('pg');
let pg: Pg;
let server: PostgresServer | undefined;
let lifeline: Lifeline | undefined;
const exporter = new InMemorySpanExporter();

beforeAll(async () => {
  const started = await startPostgres();
  server = started;
  lifeline = await startInMemoryLifeline(exporter, {
    instrumentations: [new PgInstrumentation()],
    deadlines: { policy: [{ match: { 'db.system.name': 'postgresql', 'db.operation.name': 'WITH' }, timeoutMs: 200 }] },
  });
  // Loaded after lifeline started, as in register mode.
  pg = require('pg') as Pg;
  const setup = new pg.Client(config());
  await setup.connect();
  await setup.query('CREATE TABLE IF NOT EXISTS rows (id int PRIMARY KEY, v int); INSERT INTO rows VALUES (1, 0) ON CONFLICT DO NOTHING');
  await setup.end();
}, 60_000);
afterAll(async () => {
  await lifeline?.shutdown();
  await server?.stop();
});

function postgres(): PostgresServer {
  if (server === undefined) throw new Error('PostgreSQL did not start');
  return server;
}
const config = () => {
  const { host, port, user, password, database } = postgres();
  return { host, port, user, password, database };
};

describe('pg: ended at the deadline, on the server too', () => {
  it('pool.query on pg_sleep: the caller is freed at the deadline and the backend stops', async () => {
    const pool = new pg.Pool({ ...config(), max: 2 });
    try {
      const marker = `sleep_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => pool.query(`SELECT pg_sleep(30) AS ${marker}`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await pgRunning(postgres(), marker)) === 0, 1_000)).toBe(true);
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => pool.query('SELECT $1::int AS n', [i])));
      expect(answers.map((result) => (result.rows[0] as { n: number }).n)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    } finally {
      await pool.end();
    }
  });

  it('a checked-out client waiting on a row lock: cancelled on the server, and the client serves the next query', async () => {
    const holder = new pg.Client(config());
    const waiter = new pg.Client(config());
    await holder.connect();
    await waiter.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM rows WHERE id = 1 FOR UPDATE');
      const marker = `lock_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => waiter.query(`SELECT id AS ${marker} FROM rows WHERE id = 1 FOR UPDATE`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await pgRunning(postgres(), marker)) === 0, 1_000)).toBe(true);
      // The same connection answers its next query with that query's result, not the cancelled one's.
      expect((await waiter.query('SELECT 42 AS answer')).rows).toEqual([{ answer: 42 }]);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
      await waiter.end();
    }
  });

  it('an exhausted pool: the waiter leaves the queue at its deadline, nothing is left waiting', async () => {
    const pool = new pg.Pool({ ...config(), max: 1 });
    const busy = await pool.connect();
    try {
      const { error, lateMs } = await lateness(DEADLINE_MS, () => pool.query('SELECT 1'));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(pool.waitingCount).toBe(0);
    } finally {
      busy.release();
    }
    expect((await pool.query('SELECT 2 AS n')).rows).toEqual([{ n: 2 }]);
    await pool.end();
  });

  it("a waiter served after another caller's query was cut runs under its own deadline, not that caller's", async () => {
    const pool = new pg.Pool({ ...config(), max: 1 });
    try {
      // A is cut at 150 ms and its client retired; B, queued behind it, gets a new client made when
      // A's slot frees, in A's (expired) context unless lifeline puts B's own back.
      const a = withTimeout(150, () => pool.query('SELECT pg_sleep(5)')).catch((err: unknown) => err);
      const b = withTimeout(5_000, () => pool.query('SELECT pg_sleep(0.3), 7 AS n'));
      expect(isDeadlineExceeded(await a)).toBe(true);
      expect((await b).rows[0]).toMatchObject({ n: 7 });
    } finally {
      await pool.end();
    }
  });

  it("a waiter an idle client serves gets it in its own context, not in that of the client's first caller", async () => {
    const pool = new pg.Pool({ ...config(), max: 1 });
    try {
      // The client is made under a 100 ms deadline; its socket's events run in that context from then on.
      await withTimeout(100, () => pool.query('SELECT 1'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      // Queued behind each other: each is handed the freed client from the socket's (expired) context.
      const marker = `idle_${String(Date.now())}`;
      const deadlines: (number | undefined)[] = [];
      const results = await Promise.allSettled(
        [0, 1, 2, 3].map((i) =>
          withTimeout(5_000 + i * 1_000, () => {
            deadlines[i] = currentDeadline()?.at;
            return pool.query(`SELECT pg_sleep(0.05), $1::int AS ${marker}_${String(i)}`, [i]);
          }),
        ),
      );
      expect(results.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
      // Each query's span records its own caller's deadline.
      const recorded = await Promise.all(
        [0, 1, 2, 3].map(async (i) => {
          const span = await endedClientSpan(
            () => exporter.getFinishedSpans(),
            (s) =>
              [s.attributes['db.query.text'], s.attributes['db.statement']].some(
                (text) => typeof text === 'string' && text.includes(`${marker}_${String(i)}`),
              ),
          );
          return span?.attributes['lifeline.deadline.at'];
        }),
      );
      expect(recorded).toEqual(deadlines.map((at) => (at === undefined ? undefined : new Date(at).toISOString())));
    } finally {
      await pool.end();
    }
  });

  it("pg's own query_timeout, sooner than the deadline, answers the caller once, and the deadline adds nothing", async () => {
    const client = new pg.Client({ ...config(), query_timeout: 100 });
    await client.connect();
    try {
      const answers: unknown[] = [];
      withTimeout(300, () => {
        client.query('SELECT pg_sleep(1)', (error: Error | null) => {
          answers.push(error);
        });
      });
      // Past the deadline: a second answer (the deadline's) would have come by now.
      await new Promise((resolve) => setTimeout(resolve, 300 + 200));
      expect(answers).toHaveLength(1);
      expect(String(answers[0])).toContain('Query read timeout');
    } finally {
      await client.end().catch(() => undefined);
    }
  });

  it('a policy rule matching db.operation.name bounds the statement it names, and only that one', async () => {
    const client = new pg.Client(config());
    await client.connect();
    try {
      const started = performance.now();
      const error = await client.query('WITH s AS (SELECT pg_sleep(5)) SELECT * FROM s').catch((err: unknown) => err);
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(performance.now() - started).toBeLessThan(200 + 1_000);
      expect((await client.query('SELECT pg_sleep(0.3), 1 AS n')).rows[0]).toMatchObject({ n: 1 });
    } finally {
      await client.end();
    }
  });

  it("one query records one client span under OpenTelemetry's pg instrumentation, pg loaded after both", async () => {
    // The instrumentation patches pg/lib/client.js, then the package's Client (the same prototype),
    // and replaces its first wrapper by its marks: lifeline's wrapper between the two once hid it,
    // and every query recorded two spans.
    const client = new pg.Client(config());
    await client.connect();
    try {
      const marker = `once_${String(Date.now())}`;
      await withTimeout(5_000, () => client.query(`SELECT 1 AS ${marker}`));
      await client.query(`WITH s AS (SELECT 1) SELECT * FROM s AS ${marker}_rule`); // a rule's deadline
      const spans = (text: string) =>
        exporter
          .getFinishedSpans()
          .filter((s) =>
            [s.attributes['db.query.text'], s.attributes['db.statement']].some((t) => typeof t === 'string' && t.endsWith(text)),
          );
      const scoped = spans(`AS ${marker}`);
      expect(scoped).toHaveLength(1);
      expect(scoped[0]?.attributes).toMatchObject({ 'lifeline.deadline.source': 'scope' });
      expect(spans(`AS ${marker}_rule`)).toHaveLength(1);
    } finally {
      await client.end();
    }
  });

  it('the client span is marked: deadline attributes, error.type timeout, exceeded', async () => {
    const client = new pg.Client(config());
    await client.connect();
    try {
      const marker = `span_${String(Date.now())}`;
      await withTimeout(DEADLINE_MS, () => client.query(`SELECT pg_sleep(10) AS ${marker}`)).catch(() => undefined);
      const span = await endedClientSpan(
        () => exporter.getFinishedSpans(),
        (s) =>
          [s.attributes['db.query.text'], s.attributes['db.statement']].some((text) => typeof text === 'string' && text.includes(marker)),
      );
      expect(span?.attributes).toMatchObject({
        'lifeline.deadline.source': 'scope',
        'error.type': 'timeout',
        'lifeline.deadline.exceeded': true,
      });
      expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    } finally {
      await client.end();
    }
  });

  it('a query that ends first leaves no timer behind, and the promise and callback forms answer as without lifeline', async () => {
    const client = new pg.Client(config());
    await client.connect();
    try {
      const timers = async () => {
        await new Promise((resolve) => setImmediate(resolve));
        return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      };
      const before = await timers();
      const rows = await withTimeout(5_000, () => client.query('SELECT 1 AS n'));
      expect(rows.rows).toEqual([{ n: 1 }]);
      // 50 more: a timer left per query would show as 50 (other timers of the process come and go).
      for (let i = 0; i < 50; i++) await withTimeout(5_000, () => client.query('SELECT 1'));
      const viaCallback = await withTimeout(
        5_000,
        () =>
          new Promise((resolve, reject) => {
            client.query('SELECT $1::text AS t', ['x'], (err: Error | undefined, result: { rows: unknown[] }) => {
              if (err) reject(err);
              else resolve(result.rows);
            });
          }),
      );
      expect(viaCallback).toEqual([{ t: 'x' }]);
      const statement = { text: 'SELECT $1::int AS n', values: [7] };
      await withTimeout(5_000, () => client.query(statement));
      // pg writes the callback into the object it is given: the app's own object stays as it was.
      expect(Object.keys(statement)).toEqual(['text', 'values']);
      expect(await timers()).toBeLessThan(before + 10);
    } finally {
      await client.end();
    }
  });

  it('1,000 deadline-ended queries on a pool of 10 leave 10 usable connections and nothing waiting, and cost no reconnects', async () => {
    let made = 0;
    // Every connection the pool opens, attempts that a deadline cut included (not the cancel
    // requests', made from the same class with no credentials).
    const Counted = class extends pg.Client {
      constructor(options?: ConstructorParameters<typeof pg.Client>[0]) {
        super(options);
        if (typeof options === 'object' && options.user !== undefined) made++;
      }
    };
    const pool = new pg.Pool({ ...config(), max: 10, Client: Counted });
    try {
      // Warm, as a pool in service is: the 20 ms deadlines below are for queries, not for connecting.
      const warm = await Promise.all(Array.from({ length: 10 }, () => pool.connect()));
      for (const c of warm) c.release();
      made = 0;
      for (let round = 0; round < 100; round++) {
        const ended = await Promise.all(
          Array.from({ length: 10 }, () => withTimeout(20, () => pool.query('SELECT pg_sleep(5)')).catch((err: unknown) => err)),
        );
        expect(ended.every(isDeadlineExceeded)).toBe(true);
      }
      expect(await eventually(async () => (await pgRunning(postgres(), 'pg_sleep(5)')) === 0, 3_000)).toBe(true);
      expect(pool.waitingCount).toBe(0);
      const clients = await Promise.all(Array.from({ length: 10 }, () => pool.connect()));
      const pids = await Promise.all(
        clients.map(async (c) => (await c.query('SELECT pg_backend_pid() AS pid')).rows[0] as { pid: number }),
      );
      expect(new Set(pids.map((p) => p.pid)).size).toBe(10);
      for (const c of clients) c.release();
      // A cut query's connection goes back to the pool once the server has ended the query: without
      // that, pg-pool drops it and each of the 1,000 cuts costs a connect and a new backend.
      expect(made).toBe(0);
    } finally {
      await pool.end();
    }
  }, 120_000);

  it("a cut query's connection goes back to the pool: the next caller gets the same backend, not a new connection", async () => {
    const pool = new pg.Pool({ ...config(), max: 1 });
    try {
      const first = await pool.query('SELECT pg_backend_pid() AS pid');
      const pid = (first.rows[0] as { pid: number }).pid;
      const cut = withTimeout(100, () => pool.query('SELECT pg_sleep(5)')).catch((err: unknown) => err);
      // Queued behind the cut query on the pool's one connection, with no deadline of its own.
      const next = pool.query('SELECT pg_backend_pid() AS pid');
      expect(isDeadlineExceeded(await cut)).toBe(true);
      expect(((await next).rows[0] as { pid: number }).pid).toBe(pid);
      expect(pool.totalCount).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it("a waiter with no deadline still leaves the queue at pg-pool's own connectionTimeoutMillis", async () => {
    const pool = new pg.Pool({ ...config(), max: 1, connectionTimeoutMillis: 100 });
    const held = await pool.connect();
    try {
      const error = await new Promise<unknown>((resolve) => {
        pool.connect((err: unknown) => {
          resolve(err);
        });
      });
      expect(String(error)).toMatch(/timeout/i);
      expect(pool.waitingCount).toBe(0); // found by its callback and taken out
    } finally {
      held.release();
      await pool.end();
    }
  });

  it('a cut query that leaves a transaction open: its connection is dropped, not handed on', async () => {
    const pool = new pg.Pool({ ...config(), max: 1 });
    try {
      const before = ((await pool.query('SELECT pg_backend_pid() AS pid')).rows[0] as { pid: number }).pid;
      // One simple-protocol string: BEGIN runs, the sleep is cancelled, the transaction stays (aborted).
      const cut = await withTimeout(100, () => pool.query('BEGIN; SELECT pg_sleep(5)')).catch((err: unknown) => err);
      expect(isDeadlineExceeded(cut)).toBe(true);
      const after = (await pool.query('SELECT pg_backend_pid() AS pid, now() = statement_timestamp() AS fresh')).rows[0] as {
        pid: number;
        fresh: boolean;
      };
      expect(after.pid).not.toBe(before);
      expect(after.fresh).toBe(true); // outside a transaction (in one, now() is the transaction's start)
    } finally {
      await pool.end();
    }
  });
});

describe('pg: a transaction a deadline cut', () => {
  it('the ROLLBACK sent after it, in the same expired context, still runs: the next borrower gets a clean connection', async () => {
    const pool = new pg.Pool({ ...config(), max: 1 });
    try {
      const client = await pool.connect();
      const rolledBack = await withTimeout(200, async () => {
        await client.query('BEGIN');
        await client.query('SELECT pg_sleep(5)').catch((err: unknown) => err);
        // As Sequelize, knex and TypeORM do on an error: the deadline has passed by now.
        return client.query('ROLLBACK').then(
          () => 'rolled back',
          (err: unknown) => err,
        );
      });
      expect(rolledBack).toBe('rolled back');
      client.release();
      // Without the ROLLBACK, every query of the next borrower fails: 25P02, in failed transaction.
      expect((await pool.query('SELECT 3 AS n')).rows).toEqual([{ n: 3 }]);
    } finally {
      await pool.end();
    }
  });
});

describe('pg: many calls', () => {
  it('100,000 queries each under its own deadline: no retained heap growth, no listener warning, the same 10 connections', async () => {
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
    const pool = new pg.Pool({ ...config(), max: 10 });
    let connections = 0;
    pool.on('connect', () => connections++);
    try {
      const round = () =>
        Promise.all(Array.from({ length: 1_000 }, (_, i) => withTimeout(10_000, () => pool.query('SELECT $1::int AS n', [i]))));
      for (let i = 0; i < 5; i++) await round(); // warm-up: the driver's and V8's one-time allocations
      exporter.reset();
      const before = heap();
      for (let i = 0; i < 100; i++) await round();
      exporter.reset(); // the spans OpenTelemetry's pg instrumentation made, kept by this test's in-memory exporter
      const grown = heap() - before;
      console.log(
        `pg: 100,000 deadline-bound queries, retained heap growth ${(grown / 2 ** 20).toFixed(2)} MiB, ${String(connections)} connections`,
      );
      // lifeline's state per query (a timer, a call object, closures) is ~0.5 KiB: kept for every
      // query it would retain ~50 MiB. 8 MiB is far under that and over GC noise.
      expect(grown).toBeLessThan(8 * 2 ** 20);
      expect(warnings.filter((w) => w.includes('MaxListeners'))).toEqual([]);
      expect(connections).toBe(10);
    } finally {
      process.off('warning', onWarning);
      await pool.end();
    }
  }, 120_000);
});

describe('pg: through the ORMs on it', () => {
  it('knex: the error the app sees is recognised and the backend stops', async () => {
    const knex = (require('knex') as typeof import('knex').knex)({ client: 'pg', connection: config(), pool: { min: 0, max: 2 } });
    try {
      const marker = `knex_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => knex.raw(`SELECT pg_sleep(30) AS ${marker}`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await pgRunning(postgres(), marker)) === 0, 1_000)).toBe(true);
      expect((await knex.raw<{ rows: unknown[] }>('SELECT 5 AS n')).rows).toEqual([{ n: 5 }]);
    } finally {
      await knex.destroy();
    }
  });

  it('Sequelize: its DatabaseError is recognised and the backend stops', async () => {
    const { Sequelize } = require('sequelize') as typeof import('sequelize');
    const { host, port, user, password, database } = config();
    const sequelize = new Sequelize(database, user, password, { host, port, dialect: 'postgres', logging: false, pool: { max: 2 } });
    try {
      const marker = `sequelize_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => sequelize.query(`SELECT pg_sleep(30) AS ${marker}`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await pgRunning(postgres(), marker)) === 0, 1_000)).toBe(true);
      expect((await sequelize.query('SELECT 6 AS n'))[0]).toEqual([{ n: 6 }]);
    } finally {
      await sequelize.close();
    }
  });
});
