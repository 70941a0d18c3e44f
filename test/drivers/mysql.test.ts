import { SpanStatusCode } from '@opentelemetry/api';
import { MySQL2Instrumentation } from '@opentelemetry/instrumentation-mysql2';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDeadlineExceeded, withTimeout } from '../../src/index.js';
import type { Lifeline } from '../../src/sdk/index.js';
import { lateness } from '../support/clients.js';
import { eventually, startMariadb, type MariadbServer } from '../support/databases.js';
import { endedClientSpan, startInMemoryLifeline } from '../support/tracing.js';

/**
 * mysql2 under lifeline, against a real MariaDB: each way a query gets stuck (a slow statement, a
 * row lock, an exhausted pool, a server that never greets) ends at its deadline for the caller, the
 * server stops running it (KILL QUERY), and the connection and the pool stay whole.
 */
const DEADLINE_MS = 300;
/** How late past its deadline a cut call may end: scheduling on a loaded 2-core machine, not a hang. */
const LATE_MS = 50;

const require = createRequire(import.meta.url);
type Mysql = typeof import('mysql2');
type MysqlPromise = typeof import('mysql2/promise');
let mysql: Mysql;
let mysqlPromise: MysqlPromise;
let server: MariadbServer;
let lifeline: Lifeline;
const exporter = new InMemorySpanExporter();

beforeAll(async () => {
  server = await startMariadb();
  lifeline = await startInMemoryLifeline(exporter, {
    instrumentations: [new MySQL2Instrumentation()],
    deadlines: { policy: [{ match: { 'db.system.name': 'mariadb', 'db.operation.name': 'WITH' }, timeoutMs: 200 }] },
  });
  // Loaded after lifeline started, as in register mode.
  mysql = require('mysql2') as Mysql;
  mysqlPromise = require('mysql2/promise') as MysqlPromise;
  await server.admin(
    `CREATE TABLE IF NOT EXISTS ${server.database}.locked (id int PRIMARY KEY, v int) ENGINE=InnoDB; INSERT IGNORE INTO ${server.database}.locked VALUES (1, 0)`,
  );
}, 60_000);
afterAll(async () => {
  // Unset when beforeAll failed: that failure is the one to read.
  await (lifeline as Lifeline | undefined)?.shutdown();
  await (server as MariadbServer | undefined)?.stop();
});

const config = () => ({ host: server.host, port: server.port, user: server.user, password: server.password, database: server.database });

/** Server threads running a statement that contains `marker` (but not this probe's own). */
async function running(marker: string): Promise<number> {
  const rows = await server.admin(
    `SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE '%${marker}%' AND INFO NOT LIKE '%PROCESSLIST%'`,
  );
  return Number(rows[0]?.n ?? 0);
}

/** mysql2's pool internals a test reads: who is waiting for a connection, and how many it holds. */
interface PoolInternals {
  _connectionQueue: { length: number };
  _allConnections: { length: number };
}

describe('mysql2: ended at the deadline, on the server too', () => {
  it('pool.query on SLEEP: the caller is freed at the deadline, the server stops, the pool serves 20 queries after', async () => {
    const pool = mysql.createPool({ ...config(), connectionLimit: 2 });
    const db = pool.promise();
    try {
      const marker = `sleep_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => db.query(`SELECT SLEEP(30) AS ${marker}`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await running(marker)) === 0, 1_000)).toBe(true);
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => db.query('SELECT ? AS n', [i])));
      expect(answers.map(([rows]) => (rows as { n: number }[])[0]?.n)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    } finally {
      await db.end();
    }
  });

  it('a connection waiting on a row lock: killed on the server, its caller called once, and it answers the next query with its own result', async () => {
    const holder = mysql.createConnection(config()).promise();
    const waiter = mysql.createConnection(config());
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM locked WHERE id = 1 FOR UPDATE');
      const marker = `lock_${String(Date.now())}`;
      let calls = 0;
      const { error, lateMs } = await lateness(
        DEADLINE_MS,
        () =>
          new Promise((resolve, reject) => {
            waiter.query(`SELECT id AS ${marker} FROM locked WHERE id = 1 FOR UPDATE`, (err, rows) => {
              calls++;
              if (err) reject(err);
              else resolve(rows);
            });
          }),
      );
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await running(marker)) === 0, 1_000)).toBe(true);
      // Sent at once, held until the killed query's answer (1317) came: the answer is this query's.
      const [next] = await waiter.promise().query('SELECT 42 AS answer');
      expect(next).toEqual([{ answer: 42 }]);
      expect(calls).toBe(1);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
      await waiter.promise().end();
    }
  });

  it('an exhausted pool: the waiter leaves the queue at its deadline, nothing is left waiting', async () => {
    const pool = mysqlPromise.createPool({ ...config(), connectionLimit: 1 });
    const busy = await pool.getConnection();
    try {
      const { error, lateMs } = await lateness(DEADLINE_MS, () => pool.query('SELECT 1'));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      const checkout = await lateness(DEADLINE_MS, () => pool.getConnection());
      expect(isDeadlineExceeded(checkout.error)).toBe(true);
      expect(checkout.lateMs).toBeLessThan(LATE_MS);
      expect((pool.pool as unknown as PoolInternals)._connectionQueue.length).toBe(0);
    } finally {
      busy.release();
    }
    expect((await pool.query('SELECT 2 AS n'))[0]).toEqual([{ n: 2 }]);
    await pool.end();
  });

  it('execute (prepared) through the promise API: cut at the deadline, the server stops, the connection goes on', async () => {
    const connection = await mysqlPromise.createConnection(config());
    try {
      const marker = `execute_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => connection.execute(`SELECT SLEEP(?) AS ${marker}`, [30]));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await running(marker)) === 0, 1_000)).toBe(true);
      expect((await connection.execute('SELECT ? + 1 AS n', [6]))[0]).toEqual([{ n: 7 }]);
    } finally {
      await connection.end();
    }
  });

  it('a server that accepts but never greets: the connect (handshake) ends at the deadline', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    try {
      const promised = await lateness(DEADLINE_MS, () => mysqlPromise.createConnection({ ...config(), port }));
      expect(isDeadlineExceeded(promised.error)).toBe(true);
      expect(promised.lateMs).toBeLessThan(LATE_MS);
      const pool = mysql.createPool({ ...config(), port, connectionLimit: 1 });
      const pooled = await lateness(DEADLINE_MS, () => pool.promise().query('SELECT 1'));
      expect(isDeadlineExceeded(pooled.error)).toBe(true);
      expect(pooled.lateMs).toBeLessThan(LATE_MS);
      // The cut connection left the pool: its slot is free for the next caller.
      expect(await eventually(() => Promise.resolve((pool as unknown as PoolInternals)._allConnections.length === 0), 100)).toBe(true);
      await pool.promise().end();
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('a kill that cannot be confirmed within 2 s: the connection is retired, the pool drops it and serves the next caller on a new one', async () => {
    // A forwarder to the server whose new connections can be blackholed: the pool's connection is
    // made before, the kill's connection after.
    let blackhole = false;
    const sockets = new Set<Socket>();
    const forwarder = createServer((socket) => {
      sockets.add(socket);
      if (blackhole) return;
      const upstream = connect(server.port, server.host);
      sockets.add(upstream);
      socket.pipe(upstream).pipe(socket);
      const close = (): void => {
        socket.destroy();
        upstream.destroy();
      };
      socket.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
    });
    await new Promise<void>((resolve) => forwarder.listen(0, '127.0.0.1', resolve));
    const port = (forwarder.address() as { port: number }).port;
    const pool = mysql.createPool({ ...config(), port, connectionLimit: 1 });
    const db = pool.promise();
    const marker = `unconfirmed_${String(Date.now())}`;
    try {
      await db.query('SELECT 1');
      blackhole = true;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => db.query(`SELECT SLEEP(30) AS ${marker}`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      const cut = performance.now();
      // Still checked out while the kill is unconfirmed, then dropped.
      expect((pool as unknown as PoolInternals)._allConnections.length).toBe(1);
      expect(await eventually(() => Promise.resolve((pool as unknown as PoolInternals)._allConnections.length === 0), 3_000)).toBe(true);
      expect(performance.now() - cut).toBeGreaterThan(1_500);
      blackhole = false;
      expect((await db.query('SELECT 3 AS n'))[0]).toEqual([{ n: 3 }]);
    } finally {
      await server
        .admin(
          `SELECT CONCAT('KILL QUERY ', ID) AS k FROM information_schema.PROCESSLIST WHERE INFO LIKE '%${marker}%' AND INFO NOT LIKE '%PROCESSLIST%'`,
        )
        .then((rows) => Promise.all(rows.map((row) => server.admin(String(row.k)))));
      await db.end();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => forwarder.close(resolve));
    }
  });

  it("a policy rule matching db.system.name 'mariadb' and db.operation.name bounds the statement it names, and only that one", async () => {
    const connection = await mysqlPromise.createConnection(config());
    try {
      const started = performance.now();
      const error = await connection.query('WITH s AS (SELECT SLEEP(5) AS z) SELECT * FROM s').catch((err: unknown) => err);
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(performance.now() - started).toBeLessThan(200 + 1_000);
      expect((await connection.query('SELECT SLEEP(0.3) AS z, 1 AS n'))[0]).toMatchObject([{ n: 1 }]);
    } finally {
      await connection.end();
    }
  });

  it('the client span of OpenTelemetry’s mysql2 instrumentation is marked: deadline attributes, error.type timeout, exceeded', async () => {
    const connection = await mysqlPromise.createConnection(config());
    try {
      const marker = `span_${String(Date.now())}`;
      await withTimeout(DEADLINE_MS, () => connection.query(`SELECT SLEEP(10) AS ${marker}`)).catch(() => undefined);
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
      await connection.end();
    }
  });

  it('queries that end first leave no timer behind, and the promise and callback forms answer as without lifeline', async () => {
    const connection = mysql.createConnection(config());
    try {
      await connection.promise().query('SELECT 1');
      const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      const before = timers();
      for (let i = 0; i < 50; i++) {
        const [rows] = await withTimeout(5_000, () => connection.promise().query('SELECT ? AS n', [i]));
        expect(rows).toEqual([{ n: i }]);
      }
      const viaCallback = await withTimeout(
        5_000,
        () =>
          new Promise((resolve, reject) => {
            connection.query('SELECT ? AS t', ['x'], (err, rows) => {
              if (err) reject(err);
              else resolve(rows);
            });
          }),
      );
      expect(viaCallback).toEqual([{ t: 'x' }]);
      const viaExecute = await withTimeout(
        5_000,
        () =>
          new Promise((resolve, reject) => {
            connection.execute('SELECT ? AS t', ['y'], (err, rows) => {
              if (err) reject(err);
              else resolve(rows);
            });
          }),
      );
      expect(viaExecute).toEqual([{ t: 'y' }]);
      // 51 queries would have left 51 timers: at most the process's own others came and went.
      expect(timers()).toBeLessThanOrEqual(before + 2);
    } finally {
      await connection.promise().end();
    }
  });

  it('1,000 deadline-ended queries on a pool of 10 leave 10 usable connections and nothing waiting', async () => {
    const pool = mysql.createPool({ ...config(), connectionLimit: 10 });
    const db = pool.promise();
    try {
      for (let round = 0; round < 100; round++) {
        const ended = await Promise.all(
          Array.from({ length: 10 }, () => withTimeout(20, () => db.query('SELECT SLEEP(5) AS thousand')).catch((err: unknown) => err)),
        );
        expect(ended.every(isDeadlineExceeded)).toBe(true);
      }
      expect(await eventually(async () => (await running('SLEEP(5) AS thousand')) === 0, 3_000)).toBe(true);
      expect((pool as unknown as PoolInternals)._connectionQueue.length).toBe(0);
      const connections = await Promise.all(Array.from({ length: 10 }, () => db.getConnection()));
      const ids = await Promise.all(
        connections.map(async (c) => ((await c.query('SELECT CONNECTION_ID() AS id'))[0] as { id: number }[])[0]?.id),
      );
      expect(new Set(ids).size).toBe(10);
      for (const c of connections) c.release();
    } finally {
      await db.end();
    }
  }, 120_000);
});

describe('mysql2: a transaction a deadline cut', () => {
  it('the ROLLBACK sent after it, in the same expired context, still runs: the next borrower is in no transaction', async () => {
    const pool = mysqlPromise.createPool({ ...config(), connectionLimit: 1 });
    try {
      const connection = await pool.getConnection();
      const rolledBack = await withTimeout(200, async () => {
        await connection.query('START TRANSACTION');
        await connection.query('SELECT SLEEP(5)').catch((err: unknown) => err);
        // As knex and Sequelize do on an error: the deadline has passed by now.
        return connection.query('ROLLBACK').then(
          () => 'rolled back',
          (err: unknown) => err,
        );
      });
      expect(rolledBack).toBe('rolled back');
      connection.release();
      // Without the ROLLBACK the next borrower's statements would run inside the open transaction.
      const [rows] = await pool.query('SELECT @@in_transaction AS open');
      expect(rows).toEqual([{ open: 0 }]);
    } finally {
      await pool.end();
    }
  });
});

describe('mysql2: through the ORMs on it', () => {
  it('knex: the error the app sees is recognised and the server stops', async () => {
    const knex = (require('knex') as typeof import('knex').knex)({ client: 'mysql2', connection: config(), pool: { min: 0, max: 2 } });
    try {
      const marker = `knex_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => knex.raw(`SELECT SLEEP(30) AS ${marker}`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await running(marker)) === 0, 1_000)).toBe(true);
      expect(((await knex.raw('SELECT 5 AS n')) as [unknown])[0]).toEqual([{ n: 5 }]);
    } finally {
      await knex.destroy();
    }
  });

  it("Sequelize (dialect 'mysql', on mysql2): its DatabaseError is recognised and the server stops", async () => {
    const { Sequelize } = require('sequelize') as typeof import('sequelize');
    const { host, port, user, password, database } = config();
    const sequelize = new Sequelize(database, user, password, { host, port, dialect: 'mysql', logging: false, pool: { max: 2 } });
    try {
      const marker = `sequelize_${String(Date.now())}`;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => sequelize.query(`SELECT SLEEP(30) AS ${marker}`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(await eventually(async () => (await running(marker)) === 0, 1_000)).toBe(true);
      expect((await sequelize.query('SELECT 6 AS n'))[0]).toEqual([{ n: 6 }]);
    } finally {
      await sequelize.close();
    }
  });
});
