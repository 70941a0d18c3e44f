import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { createRequire } from 'node:module';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startMariadb, startPostgres, startRedis } from '../support/databases.js';
import { runNode } from '../support/node.js';

/**
 * The database servers the driver tests run (test/support/databases.ts): each starts, the app's own
 * driver reaches it with the test user, `admin` reaches it past the drivers, and `stop()` leaves
 * nothing behind, neither the process nor its data directory.
 */
const require = createRequire(import.meta.url);

/** Whether process `pid` is still there (a zombie left to a reaper-less init counts as gone). */
function running(pid: number): boolean {
  const state = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).stdout.trim();
  return state !== '' && !state.startsWith('Z');
}

function processUser(pid: number): string {
  return spawnSync('ps', ['-o', 'user=', '-p', String(pid)], { encoding: 'utf8' }).stdout.trim();
}

/** The pid of the process listening on `port` (the server, not a wrapper that started it). */
function listener(port: number): number {
  const out = spawnSync('ss', ['-Hltnp', `sport = :${port}`], { encoding: 'utf8' }).stdout;
  const pid = /pid=(\d+)/.exec(out)?.[1];
  if (pid === undefined) throw new Error(`nothing listens on ${port}: ${out}`);
  return Number(pid);
}

describe('database servers for driver tests', () => {
  it('PostgreSQL: pg logs in with the test user, admin is a superuser, stop removes everything', async () => {
    const started = performance.now();
    const server = await startPostgres();
    onTestFinished(() => server.stop());
    const startMs = performance.now() - started;
    const pid = listener(server.port);
    const pg = require('pg') as typeof import('pg');
    const client = new pg.Client({
      host: server.host,
      port: server.port,
      user: server.user,
      password: server.password,
      database: server.database,
    });
    await client.connect();
    const { rows } = await client.query<{ user: string; db: string }>('SELECT current_user AS user, current_database() AS db');
    expect(rows).toEqual([{ user: server.user, db: server.database }]);
    // A wrong password is refused: the app user is checked, not trusted.
    const wrong = new pg.Client({ host: server.host, port: server.port, user: server.user, password: 'wrong', database: server.database });
    await expect(wrong.connect()).rejects.toThrow(/password authentication failed/);

    expect(await server.admin("SELECT 1 AS one, NULL AS nothing, '' AS empty, 'a,\"b' AS quoted")).toEqual([
      { one: '1', nothing: null, empty: '', quoted: 'a,"b' },
    ]);
    const superuser = await server.admin('SELECT rolsuper FROM pg_roles WHERE rolname = current_user');
    expect(superuser).toEqual([{ rolsuper: 't' }]);
    // admin sees the app's connection (what driver tests check to show the server stopped a query).
    const sessions = await server.admin(`SELECT usename FROM pg_stat_activity WHERE usename = '${server.user}'`);
    expect(sessions).toEqual([{ usename: server.user }]);
    await expect(server.admin('SELECT * FROM no_such_table')).rejects.toThrow(/no_such_table/);
    expect(await server.admin('SHOW max_connections')).toEqual([{ max_connections: '100' }]);
    // The data directory is a copy of a template without template0: databases still come from template1.
    await server.admin('CREATE DATABASE another');
    // PostgreSQL refuses root: as root it runs as the postgres user, otherwise as the test's user.
    expect(processUser(pid)).toBe(process.getuid?.() === 0 ? 'postgres' : userInfo().username);

    await client.end();
    await server.stop();
    expect(running(pid)).toBe(false);
    expect(existsSync(server.dir)).toBe(false);
    console.log(`postgres started in ${Math.round(startMs)} ms`);
  });

  it('MariaDB: mysql2 logs in with the test user, admin is root, stop removes everything', async () => {
    const started = performance.now();
    const server = await startMariadb();
    onTestFinished(() => server.stop());
    const startMs = performance.now() - started;
    const pid = listener(server.port);
    const mysql = require('mysql2/promise') as typeof import('mysql2/promise');
    const connection = await mysql.createConnection({
      host: server.host,
      port: server.port,
      user: server.user,
      password: server.password,
      database: server.database,
    });
    const [rows] = await connection.query('SELECT CURRENT_USER() AS user, DATABASE() AS db');
    expect(rows).toEqual([{ user: `${server.user}@%`, db: server.database }]);
    await connection.query('CREATE TABLE t (id INT PRIMARY KEY)');
    await expect(mysql.createConnection({ host: server.host, port: server.port, user: server.user, password: 'wrong' })).rejects.toThrow(
      /Access denied/,
    );

    expect(await server.admin("SELECT 1 AS one, NULL AS nothing, '' AS empty, '<a&\"b>' AS markup")).toEqual([
      { one: '1', nothing: null, empty: '', markup: '<a&"b>' },
    ]);
    const processes = await server.admin(`SELECT USER FROM information_schema.PROCESSLIST WHERE USER = '${server.user}'`);
    expect(processes).toEqual([{ USER: server.user }]);
    expect(await server.admin(`SHOW TABLES FROM ${server.database}`)).toEqual([{ [`Tables_in_${server.database}`]: 't' }]);
    await expect(server.admin('SELECT * FROM no_such_table')).rejects.toThrow(/no_such_table/);

    await connection.end();
    await server.stop();
    expect(running(pid)).toBe(false);
    expect(existsSync(server.dir)).toBe(false);
    console.log(`mariadb started in ${Math.round(startMs)} ms`);
  });

  it('Redis: ioredis reaches it, admin speaks RESP on its own socket, stop removes everything', async () => {
    const started = performance.now();
    const server = await startRedis();
    onTestFinished(() => server.stop());
    const startMs = performance.now() - started;
    const pid = listener(server.port);
    const { Redis } = require('ioredis') as typeof import('ioredis');
    const client = new Redis({ host: server.host, port: server.port, lazyConnect: true });
    await client.connect();
    await client.set('k', 'v');
    expect(await client.get('k')).toBe('v');

    expect(await server.admin(['PING'])).toBe('PONG');
    expect(await server.admin(['GET', 'k'])).toBe('v');
    expect(await server.admin(['GET', 'missing'])).toBeNull();
    expect(await server.admin(['DBSIZE'])).toBe(1);
    expect(await server.admin(['MGET', 'k', 'missing'])).toEqual(['v', null]);
    // Two clients: the app's and admin's own.
    expect(
      String(await server.admin(['CLIENT', 'LIST']))
        .trim()
        .split('\n'),
    ).toHaveLength(2);
    await expect(server.admin(['NO-SUCH-COMMAND'])).rejects.toThrow(/unknown command/);

    client.disconnect();
    await server.stop();
    expect(running(pid)).toBe(false);
    expect(existsSync(server.dir)).toBe(false);
    console.log(`redis started in ${Math.round(startMs)} ms`);
  });

  it('servers die with the test process that started them', async () => {
    // A process that starts all three and is then killed outright (no exit hooks run).
    const source = `
      const { startPostgres, startMariadb, startRedis } = await import(${JSON.stringify(new URL('../support/databases.ts', import.meta.url).pathname)});
      const servers = await Promise.all([startPostgres(), startMariadb(), startRedis()]);
      console.log(JSON.stringify(servers.map((s) => s.port)));
      console.log(process.pid);
      process.kill(process.pid, 'SIGKILL');
    `;
    const result = await runNode(['--input-type=module', '-e', source], { timeoutMs: 60_000 });
    const [portsLine = '[]', pidLine = '0'] = result.stdout.trim().split('\n');
    const ports = JSON.parse(portsLine) as number[];
    expect(ports).toHaveLength(3);
    for (const port of ports) {
      const deadline = Date.now() + 10_000;
      let open = true;
      while (open && Date.now() < deadline) {
        const out = spawnSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).stdout;
        open = out.trim() !== '';
        if (open) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(open, `port ${port} still listened on after its test process died`).toBe(false);
    }
    // Its data directories outlive it (no exit hook ran), until the next start removes them.
    const pid = Number(pidLine);
    const leftovers = (): string[] => readdirSync(tmpdir()).filter((name) => name.includes(`-${pid}-`));
    expect(leftovers()).toHaveLength(3);
    const next = await startRedis();
    await next.stop();
    expect(leftovers()).toEqual([]);
  });
});
