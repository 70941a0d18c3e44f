/**
 * Real database servers for driver tests, from the Debian packages on the machine (postgresql,
 * mariadb-server, redis-server): each on a free loopback port, in a data directory of its own under
 * os.tmpdir() that `stop()` removes. `admin` talks to the server past the npm drivers (psql, the
 * mariadb client, a raw RESP socket), since lifeline patches those drivers in-process during tests.
 *
 * Servers die with the test process: they are started through `setpriv --pdeathsig SIGKILL`, which
 * also drops root to the `postgres` user for PostgreSQL (initdb and postgres refuse to run as root).
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, Socket, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PostgresServer {
  /** The server's process id (its children inherit what is set on it: a benchmark pins it to a core of its own). */
  readonly pid: number;
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
  /** The data directory (removed by `stop()`). */
  readonly dir: string;
  /** Runs SQL as a superuser on a connection of its own (not through the app's pg), returns rows. */
  admin(sql: string): Promise<Record<string, unknown>[]>;
  stop(): Promise<void>;
}

export interface MariadbServer {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
  /** The data directory (removed by `stop()`). */
  readonly dir: string;
  /** Runs SQL as root on a connection of its own (not through the app's mysql2), returns rows. */
  admin(sql: string): Promise<Record<string, unknown>[]>;
  stop(): Promise<void>;
}

export interface RedisServer {
  /** The server's process id (its children inherit what is set on it: a benchmark pins it to a core of its own). */
  readonly pid: number;
  readonly host: string;
  readonly port: number;
  /** The server's working directory (removed by `stop()`). */
  readonly dir: string;
  /** A raw RESP command on its own socket, e.g. ['CLIENT','LIST']. Error replies reject. */
  admin(args: string[]): Promise<unknown>;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const USER = 'lifeline';
const PASSWORD = 'lifeline-test';
const DATABASE = 'lifeline';
const PG_BIN = '/usr/lib/postgresql/15/bin';
/** Readiness on a loaded 2-core machine (several suites at once) can take seconds. */
const READY_MS = 60_000;
const PORT_TRIES = 5;
const isRoot = process.getuid?.() === 0;

/** The binaries each server needs (test/preflight.mjs checks the same). */
export const SERVER_BINARIES = {
  postgres: [`${PG_BIN}/initdb`, `${PG_BIN}/postgres`, '/usr/bin/psql'],
  mariadb: ['/usr/bin/mariadb-install-db', '/usr/sbin/mariadbd', '/usr/bin/mariadb'],
  redis: ['/usr/bin/redis-server'],
} as const;

/**
 * PostgreSQL 15 with a database `lifeline` owned by a password (SCRAM) user `lifeline` on
 * 127.0.0.1; `admin` is the superuser `postgres` over the server's Unix socket.
 *
 * @example
 * const pg = await startPostgres();
 * const client = new pg.Client({ host: pg.host, port: pg.port, user: pg.user, password: pg.password, database: pg.database });
 * await pg.admin('SELECT pid FROM pg_stat_activity');
 * await pg.stop();
 */
export async function startPostgres(): Promise<PostgresServer> {
  // initdb and postgres refuse root: as root the files are the postgres user's.
  const owner = isRoot ? 'postgres' : undefined;
  const source = await postgresTemplate(owner);
  const dir = tempDir('pg');
  const data = join(dir, 'data');
  try {
    if (owner !== undefined) chownSync(dir, ...ids(owner));
    await run(asUser(owner, 'cp', ['-a', source, data]), dir);
    const server = await listenWithRetry(
      'postgres',
      dir,
      (port) =>
        asUser(owner, `${PG_BIN}/postgres`, [
          '-D',
          data,
          '-p',
          String(port),
          '-k',
          dir,
          '-c',
          `listen_addresses=${HOST}`,
          '-c',
          'max_connections=100',
          // Throwaway data: durability only costs start and test time.
          '-c',
          'fsync=off',
          '-c',
          'synchronous_commit=off',
          '-c',
          'full_page_writes=off',
          '-c',
          'shared_buffers=16MB',
        ]),
      /database system is ready to accept connections/,
      /could not bind|Address already in use|could not create any TCP\/IP sockets/,
    );
    const admin = (sql: string): Promise<Record<string, unknown>[]> =>
      run(
        [
          'psql',
          '-X',
          '-q',
          '-h',
          dir,
          '-p',
          String(server.port),
          '-U',
          'postgres',
          '-d',
          DATABASE,
          '--csv',
          '-v',
          'ON_ERROR_STOP=1',
          '-P',
          'null=\\N',
          '-c',
          sql,
        ],
        dir,
      ).then(parseCsv);
    const stop = stopper(server.child, dir, 'SIGQUIT');
    return {
      host: HOST,
      port: server.port,
      pid: server.child.pid ?? 0,
      user: USER,
      password: PASSWORD,
      database: DATABASE,
      dir,
      admin,
      stop,
    };
  } catch (error) {
    removeDir(dir);
    throw error;
  }
}

/** Bump when what a template holds changes: templates of the old kind are then not used. */
const TEMPLATE_VERSION = 3;
const templates = new Map<string, Promise<string>>();

/**
 * A data directory made once per kind, user and machine, that each start copies: initdb or
 * mariadb-install-db take 1-2 s (4 s under load), a copy of their 20-26 MB 0.3-0.6 s. It stays in the
 * temp directory for later test processes. It is built under a name of its own and renamed into
 * place, so one that is there is whole, and test processes building one at once do not collide.
 */
function template(kind: string, owner: string | undefined, build: (data: string, dir: string) => Promise<void>): Promise<string> {
  const path = join(tmpdir(), `lifeline-${kind}-template-v${TEMPLATE_VERSION}-${owner ?? String(process.getuid?.())}`);
  let made = templates.get(path);
  if (made === undefined) {
    made = (async () => {
      if (existsSync(join(path, DONE))) return path;
      const dir = tempDir(kind === 'pg15' ? 'pg' : kind);
      try {
        if (owner !== undefined) chownSync(dir, ...ids(owner));
        const data = join(dir, 'data');
        await build(data, dir);
        // A copy of a template is a server's data directory: the marker only says it is whole.
        writeFileSync(join(data, DONE), '', { mode: 0o644 });
        try {
          renameSync(data, path);
        } catch (error) {
          // Another test process put its template in place first: that one is as good.
          if (!existsSync(join(path, DONE))) throw error;
        }
        return path;
      } finally {
        removeDir(dir);
      }
    })();
    templates.set(path, made);
    made.catch(() => templates.delete(path));
  }
  return made;
}
const DONE = 'lifeline-template-complete';

/** PostgreSQL's: initdb, the test role and database (no `postgres`, no `template0`), pg_hba. */
function postgresTemplate(owner: string | undefined): Promise<string> {
  return template('pg15', owner, async (data, dir) => {
    await run(
      asUser(owner, `${PG_BIN}/initdb`, [
        '-D',
        data,
        '-U',
        'postgres',
        '-A',
        'trust',
        '-E',
        'UTF8',
        '--locale=C',
        '-N',
        '--no-instructions',
        // 1 MiB WAL segments: the default 16 MiB one is most of a copy.
        '--wal-segsize=1',
      ]),
      dir,
    );
    // Single-user mode: one statement a line (CREATE DATABASE cannot share a transaction).
    await run(
      asUser(owner, 'sh', [
        '-c',
        `printf '%s\\n' "$1" "$2" "$3" "$4" "$5" | "$0" --single -D "$6" -c fsync=off -c exit_on_error=on template1 >/dev/null`,
        `${PG_BIN}/postgres`,
        `CREATE ROLE ${USER} LOGIN PASSWORD '${PASSWORD}'`,
        `CREATE DATABASE ${DATABASE} OWNER ${USER}`,
        // Two databases fewer to copy at each start (a third of its files each): admin connects to
        // the test database, CREATE DATABASE copies template1.
        'DROP DATABASE postgres',
        'ALTER DATABASE template0 IS_TEMPLATE false',
        'DROP DATABASE template0',
        data,
      ]),
      dir,
    );
    // The superuser only over the socket (no password), the test user only with its password.
    writeFileSync(join(data, 'pg_hba.conf'), `local all postgres trust\nhost all all ${HOST}/32 scram-sha-256\n`, { mode: 0o644 });
  });
}

/** MariaDB's: mariadb-install-db (root with no password, over the socket only: the server checks). */
function mariadbTemplate(): Promise<string> {
  return template('mariadb', undefined, async (data, dir) => {
    await run(
      [
        'mariadb-install-db',
        '--no-defaults',
        `--datadir=${data}`,
        ...MARIADB_USER,
        '--auth-root-authentication-method=normal',
        '--skip-test-db',
        '--skip-name-resolve',
        ...MARIADB_INNODB,
      ],
      dir,
    );
  });
}
// Root may run mariadbd when it says so; anyone else runs it as themselves.
const MARIADB_USER = isRoot ? ['--user=root'] : [];
// Small InnoDB files: the default 96 MiB redo log is most of a data directory's size.
const MARIADB_INNODB = [
  '--innodb-log-file-size=8M',
  '--innodb-buffer-pool-size=32M',
  '--innodb-flush-log-at-trx-commit=0',
  '--skip-log-bin',
];

/**
 * MariaDB 10.11 with a database `lifeline` and a password user `lifeline` (all rights on it) on
 * 127.0.0.1; `admin` is root over the server's Unix socket.
 *
 * @example
 * const db = await startMariadb();
 * const conn = await mysql.createConnection({ host: db.host, port: db.port, user: db.user, password: db.password, database: db.database });
 * await db.admin('SHOW PROCESSLIST');
 * await db.stop();
 */
export async function startMariadb(): Promise<MariadbServer> {
  const dir = tempDir('mariadb');
  const data = join(dir, 'data');
  const socket = join(dir, 'mariadb.sock');
  try {
    await run(['cp', '-a', await mariadbTemplate(), data], dir);
    const server = await listenWithRetry(
      'mariadb',
      dir,
      (port) =>
        asUser(undefined, '/usr/sbin/mariadbd', [
          '--no-defaults',
          `--datadir=${data}`,
          `--port=${port}`,
          `--bind-address=${HOST}`,
          `--socket=${socket}`,
          `--pid-file=${join(dir, 'mariadbd.pid')}`,
          ...MARIADB_USER,
          '--skip-name-resolve',
          '--max-connections=100',
          ...MARIADB_INNODB,
        ]),
      /ready for connections/,
      /Can't start server: Bind|Address already in use|Do you already have another/,
    );
    const client = (sql: string, xml: boolean): Promise<string> =>
      run(['mariadb', '--no-defaults', `--socket=${socket}`, '-u', 'root', ...(xml ? ['--xml'] : []), '-e', sql], dir);
    const stop = stopper(server.child, dir, 'SIGKILL');
    try {
      await client(
        `CREATE DATABASE ${DATABASE}; CREATE USER '${USER}'@'%' IDENTIFIED BY '${PASSWORD}'; GRANT ALL ON ${DATABASE}.* TO '${USER}'@'%';`,
        false,
      );
    } catch (error) {
      await stop();
      throw error;
    }
    return {
      host: HOST,
      port: server.port,
      user: USER,
      password: PASSWORD,
      database: DATABASE,
      dir,
      admin: (sql) => client(sql, true).then(parseMariadbXml),
      stop,
    };
  } catch (error) {
    removeDir(dir);
    throw error;
  }
}

/**
 * Redis 7 on 127.0.0.1, no persistence, no password.
 *
 * @example
 * const redis = await startRedis();
 * const client = new Redis({ host: redis.host, port: redis.port });
 * await redis.admin(['CLIENT', 'LIST']);
 * await redis.stop();
 */
export async function startRedis(): Promise<RedisServer> {
  const dir = tempDir('redis');
  try {
    const server = await listenWithRetry(
      'redis',
      dir,
      (port) =>
        asUser(undefined, '/usr/bin/redis-server', [
          '--port',
          String(port),
          '--bind',
          HOST,
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          dir,
          '--daemonize',
          'no',
        ]),
      /Ready to accept connections/,
      /Address already in use|Could not create server TCP listening socket/,
    );
    return {
      host: HOST,
      port: server.port,
      pid: server.child.pid ?? 0,
      dir,
      admin: (args) => resp(server.port, args),
      stop: stopper(server.child, dir, 'SIGKILL'),
    };
  } catch (error) {
    removeDir(dir);
    throw error;
  }
}

// ---- processes ----

/** A command line: the program, then its arguments. */
type Argv = [string, ...string[]];

interface Started {
  child: ChildProcess;
  port: number;
}

/** Servers still running, killed and their directories removed if the test process exits first. */
const live = new Map<ChildProcess, string>();
let exitHookSet = false;
function track(child: ChildProcess, dir: string): void {
  live.set(child, dir);
  if (exitHookSet) return;
  exitHookSet = true;
  process.on('exit', () => {
    for (const [server, serverDir] of live) {
      server.kill('SIGKILL');
      removeDir(serverDir);
    }
  });
}

/**
 * Starts the server `command(port)` builds on a free port, resolving when its output matches
 * `ready`. A port taken between choosing and binding (`inUse` in the output) is tried again.
 */
async function listenWithRetry(name: string, dir: string, command: (port: number) => Argv, ready: RegExp, inUse: RegExp): Promise<Started> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const [file, ...args] = command(port);
    const log = join(dir, `${name}.log`);
    const child = spawn(file, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    track(child, dir);
    const outcome = await new Promise<'ready' | 'in-use' | Error>((resolve) => {
      let output = '';
      const timer = setTimeout(() => {
        resolve(new Error(`${name} not ready after ${READY_MS} ms:\n${output.slice(-4000)}`));
      }, READY_MS);
      let isReady = false;
      const onData = (chunk: string): void => {
        try {
          appendFileSync(log, chunk);
        } catch {
          // The server's last lines after stop() removed its directory.
        }
        if (isReady) return;
        output = (output + chunk).slice(-64 * 1024);
        if (ready.test(output)) {
          isReady = true;
          clearTimeout(timer);
          resolve('ready');
        }
      };
      child.stdout.setEncoding('utf8').on('data', onData);
      child.stderr.setEncoding('utf8').on('data', onData);
      child.once('error', (error) => {
        clearTimeout(timer);
        resolve(error);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        resolve(
          inUse.test(output) ? 'in-use' : new Error(`${name} exited (${code ?? signal}) before it was ready:\n${output.slice(-4000)}`),
        );
      });
    });
    if (outcome === 'ready') {
      // A server a test forgot to stop does not keep its process alive: the exit hook and the
      // parent-death signal end it.
      child.unref();
      for (const stream of [child.stdout, child.stderr]) if (stream instanceof Socket) stream.unref();
      return { child, port };
    }
    await kill(child, 'SIGKILL');
    live.delete(child);
    if (outcome === 'in-use' && attempt < PORT_TRIES) continue;
    throw outcome === 'in-use' ? new Error(`${name}: port in use ${PORT_TRIES} times`) : outcome;
  }
}

/** `stop()`: ends the server with `signal`, waits for it to exit, removes its directory. Idempotent. */
function stopper(child: ChildProcess, dir: string, signal: NodeJS.Signals): () => Promise<void> {
  let stopping: Promise<void> | undefined;
  return () =>
    (stopping ??= kill(child, signal).then(() => {
      live.delete(child);
      removeDir(dir);
    }));
}

function kill(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve();
      return;
    }
    child.once('exit', () => {
      resolve();
    });
    // Unref'd once ready (a forgotten server keeps nothing alive), but a stop being awaited must
    // hold the loop until the server is gone: a script whose last await this is would exit (13).
    child.ref();
    child.kill(signal);
  });
}

/**
 * `command args…` as `user` (root only), dying with this process: setpriv sets the parent-death
 * signal after it changes the user (a change of user clears it), then execs, so the pid is the server's.
 */
function asUser(user: string | undefined, command: string, args: string[]): Argv {
  const as = user === undefined ? [] : ['--reuid', user, '--regid', user, '--init-groups'];
  return ['setpriv', ...as, '--pdeathsig', 'SIGKILL', '--', command, ...args];
}

/** Runs a short-lived command to its end; rejects with its output when it fails. */
function run([file, ...args]: Argv, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, maxBuffer: 64 * 1024 * 1024, timeout: READY_MS }, (error, stdout) => {
      // The message has the command line and its stderr.
      if (error) reject(new Error(error.message.trim()));
      else resolve(stdout);
    });
  });
}

/** The uid and gid of a system user. */
function ids(user: string): [number, number] {
  const id = (flag: string): number => {
    const result = spawnSync('id', [flag, user], { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`no system user ${user} (apt-get install postgresql makes it): ${result.stderr}`);
    return Number(result.stdout.trim());
  };
  return [id('-u'), id('-g')];
}

/**
 * A loopback port free a moment ago (as test/support/node.ts finds one; this file imports nothing
 * of the repository's, so a plain Node process can load it too).
 */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// ---- directories ----

/**
 * A new directory under os.tmpdir() named after this process, so that one left by a test process
 * killed outright (no exit hook ran) is found and removed by the next start.
 */
function tempDir(kind: string): string {
  sweepOrphans();
  return mkdtempSync(join(tmpdir(), `lifeline-${kind}-${process.pid}-`));
}

function sweepOrphans(): void {
  for (const name of readdirSync(tmpdir())) {
    const match = /^lifeline-(?:pg|mariadb|redis)-(\d+)-/.exec(name);
    if (match === null || alive(Number(match[1]))) continue;
    removeDir(join(tmpdir(), name));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function removeDir(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    // Another user's leftovers (EACCES) are theirs to remove.
  }
}

// ---- clients past the drivers ----

/** psql's --csv output (header line, RFC 4180 quoting, NULL printed as \N) as rows of strings. */
export function parseCsv(text: string): Record<string, unknown>[] {
  const records: string[][] = [];
  const quoted: boolean[][] = [];
  let field = '';
  let record: string[] = [];
  let wasQuoted = false;
  let recordQuoted: boolean[] = [];
  let inQuotes = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (inQuotes) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') inQuotes = false;
      else field += c;
    } else if (c === '"') {
      inQuotes = true;
      wasQuoted = true;
    } else if (c === ',' || c === '\n') {
      record.push(field);
      recordQuoted.push(wasQuoted);
      field = '';
      wasQuoted = false;
      if (c === '\n') {
        records.push(record);
        quoted.push(recordQuoted);
        record = [];
        recordQuoted = [];
      }
    } else field += c;
  }
  if (field !== '' || record.length > 0) {
    record.push(field);
    recordQuoted.push(wasQuoted);
    records.push(record);
    quoted.push(recordQuoted);
  }
  const [header, ...rows] = records;
  if (header === undefined) return [];
  return rows.map((row, r) =>
    Object.fromEntries(header.map((name, i) => [name, row[i] === '\\N' && quoted[r + 1]?.[i] !== true ? null : (row[i] ?? null)])),
  );
}

/** The mariadb client's --xml output: rows of the last result set, NULL as null, text otherwise. */
export function parseMariadbXml(text: string): Record<string, unknown>[] {
  const sets = text.split('<resultset');
  const last = sets.at(-1) ?? '';
  if (sets.length < 2) return [];
  const rows: Record<string, unknown>[] = [];
  for (const [, body] of last.matchAll(/<row>([\s\S]*?)<\/row>/g)) {
    const row: Record<string, unknown> = {};
    for (const field of (body ?? '').matchAll(/<field name="([^"]*)"(?: (xsi:nil="true") \/>|>([\s\S]*?)<\/field>)/g)) {
      row[unescapeXml(field[1] ?? '')] = field[2] !== undefined ? null : unescapeXml(field[3] ?? '');
    }
    rows.push(row);
  }
  return rows;
}

function unescapeXml(text: string): string {
  return text.replace(/&(lt|gt|amp|quot|apos|#\d+);/g, (_, entity: string) => {
    switch (entity) {
      case 'lt':
        return '<';
      case 'gt':
        return '>';
      case 'amp':
        return '&';
      case 'quot':
        return '"';
      case 'apos':
        return "'";
      default:
        return String.fromCodePoint(Number(entity.slice(1)));
    }
  });
}

/** One RESP2 command on a fresh socket: its reply as a string, number, null or array; errors reject. */
function resp(port: number, args: string[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, HOST);
    let buffer = Buffer.alloc(0);
    socket.setTimeout(READY_MS, () => socket.destroy(new Error(`redis admin ${args.join(' ')}: no reply`)));
    socket.on('connect', () => {
      socket.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join(''));
    });
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      let parsed: [unknown, number] | undefined;
      try {
        parsed = parseResp(buffer, 0);
      } catch (error) {
        socket.destroy();
        reject(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      if (parsed === undefined) return;
      socket.end();
      resolve(parsed[0]);
    });
    socket.on('error', (error) => {
      reject(error);
    });
  });
}

/** A RESP2 value at `at`, with the offset after it; undefined while incomplete. Error replies throw. */
function parseResp(buffer: Buffer, at: number): [unknown, number] | undefined {
  const end = buffer.indexOf('\r\n', at);
  if (end === -1) return undefined;
  const type = String.fromCharCode(buffer[at] ?? 0);
  const line = buffer.toString('utf8', at + 1, end);
  const next = end + 2;
  switch (type) {
    case '+':
      return [line, next];
    case '-':
      throw new Error(`redis: ${line}`);
    case ':':
      return [Number(line), next];
    case '$': {
      const length = Number(line);
      if (length === -1) return [null, next];
      if (buffer.length < next + length + 2) return undefined;
      return [buffer.toString('utf8', next, next + length), next + length + 2];
    }
    case '*': {
      const count = Number(line);
      if (count === -1) return [null, next];
      const items: unknown[] = [];
      let offset = next;
      for (let i = 0; i < count; i++) {
        const item = parseResp(buffer, offset);
        if (item === undefined) return undefined;
        items.push(item[0]);
        offset = item[1];
      }
      return [items, offset];
    }
    default:
      throw new Error(`redis: unexpected reply ${JSON.stringify(buffer.toString('utf8', at, end))}`);
  }
}

/** Polls until `probe` is true, for at most `ms`: whether it became true (a server stopped running a query, say). */
export async function eventually(probe: () => Promise<boolean>, ms: number): Promise<boolean> {
  const until = performance.now() + ms;
  for (;;) {
    if (await probe()) return true;
    if (performance.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** How many of `server`'s backends run a statement containing `marker` (not counting this probe's own). */
export async function pgRunning(server: PostgresServer, marker: string): Promise<number> {
  const rows = await server.admin(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%${marker}%' AND query NOT LIKE '%pg_stat_activity%'`,
  );
  return Number(rows[0]?.n ?? 0);
}
