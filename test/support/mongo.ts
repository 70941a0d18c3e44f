import { deserialize, serialize, type Document } from 'bson';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A MongoDB wire-protocol server on loopback, for the mongodb driver's tests. */
export interface MongoServer {
  /** `mongodb://127.0.0.1:<port>/?directConnection=true` */
  uri: string;
  host: string;
  port: number;
  /**
   * Runs `command` on the `admin` database over a connection of its own, without the npm
   * `mongodb` driver (lifeline patches that in the tests): the server's reply document.
   */
  admin(command: Document): Promise<Document>;
  /** The server process's CPU time so far, ms (user + system): how the tests see it is still working. */
  cpuMs(): number;
  stop(): Promise<void>;
}

const ROOT = new URL('../..', import.meta.url).pathname;

/**
 * Starts FerretDB (built by otel-collector/build-ferretdb.sh, cached under .cache/bin) on the
 * SQLite backend in a throwaway directory, on a free loopback port. MongoDB itself is not
 * packaged by Debian; FerretDB speaks its wire protocol and honours `maxTimeMS` on find and
 * aggregate. Its `currentOp` always answers an empty `inprog`, so whether it still works on a
 * query is read from its CPU time ({@link MongoServer.cpuMs}).
 */
export async function startMongo(): Promise<MongoServer> {
  const binary = execFileSync('bash', [join(ROOT, 'otel-collector/build-ferretdb.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  const dir = mkdtempSync(join(tmpdir(), 'lifeline-ferretdb-'));
  const child = spawn(
    binary,
    [
      '--handler=sqlite',
      `--sqlite-url=file:${dir}/`,
      `--state-dir=${dir}`,
      '--listen-addr=127.0.0.1:0',
      '--debug-addr=-', // no metrics listener
      '--telemetry=disable', // it would call home
      '--log-format=json',
      '--log-level=INFO', // its 'Listening on' line gives the port
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let port: number;
  try {
    port = await listeningPort(child);
  } catch (error) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const host = '127.0.0.1';
  const pid = child.pid ?? 0;
  return {
    uri: `mongodb://${host}:${String(port)}/?directConnection=true`,
    host,
    port,
    admin: (command) => runCommand(host, port, command),
    cpuMs: () => processCpuMs(pid),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const kill = setTimeout(() => {
          child.kill('SIGKILL');
        }, 5_000);
        await exited;
        clearTimeout(kill);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The port FerretDB says it listens on, in its log on stderr. */
function listeningPort(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => {
      reject(new Error(`FerretDB did not listen within 20 s: ${seen.slice(-2000)}`));
    }, 20_000);
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      seen += chunk;
      const match = /Listening on TCP 127\.0\.0\.1:(\d+)/.exec(seen);
      if (match?.[1] === undefined) return;
      clearTimeout(timer);
      child.stderr?.removeAllListeners('data');
      child.stderr?.resume(); // keep draining: a full pipe would block the server
      resolve(Number(match[1]));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`FerretDB exited (${String(code ?? signal)}): ${seen.slice(-2000)}`));
    });
  });
}

const OP_MSG = 2013;

/** One OP_MSG round trip on a connection of its own: `command` with `$db: 'admin'`. */
function runCommand(host: string, port: number, command: Document): Promise<Document> {
  const body = serialize({ ...command, $db: 'admin' });
  const header = Buffer.alloc(21);
  header.writeInt32LE(21 + body.length, 0); // messageLength
  header.writeInt32LE(1, 4); // requestID
  header.writeInt32LE(0, 8); // responseTo
  header.writeInt32LE(OP_MSG, 12);
  header.writeUInt32LE(0, 16); // flagBits
  header.writeUInt8(0, 20); // section kind 0: the body
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let received = Buffer.alloc(0);
    socket.on('error', reject);
    socket.on('connect', () => socket.end(Buffer.concat([header, body])));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < received.readInt32LE(0)) return;
      socket.destroy();
      // header (16) + flagBits (4) + section kind (1), then the reply document
      if (received.readInt32LE(12) !== OP_MSG) reject(new Error(`unexpected reply opcode ${String(received.readInt32LE(12))}`));
      else resolve(deserialize(received.subarray(21, received.readInt32LE(0))));
    });
  });
}

/** utime + stime of `pid`, from /proc (clock ticks of 10 ms on Linux). */
function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
