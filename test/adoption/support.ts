/**
 * Helpers of the adoption tests: fixture services copied out of the repository, installed from the
 * packed tarball with npm, and run as their users run them (npm scripts, real processes, loopback only).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { ROOT } from '../support/node.js';

export { freePort, stopChild } from '../support/node.js';

export const SERVICES_DIR = join(ROOT, 'test/fixtures/services');

/**
 * The environment of a service's own processes: the test's Node 24 first on PATH (npm, jest and tap
 * then run on it), and nothing of this run leaking in — npm's, vitest's, OpenTelemetry's or
 * lifeline's variables — so a suite runs as it would in the service's own CI.
 */
export function serviceEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|VITEST|OTEL_|LIFELINE_|JEST_|TAP_)/i.test(key)) continue;
    if (['NODE_OPTIONS', 'NODE_ENV', 'NODE_PATH', 'TEST', 'KUBERNETES_SERVICE_HOST', 'FORCE_COLOR', 'CI'].includes(key)) continue;
    env[key] = value;
  }
  env.PATH = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`;
  env.NO_COLOR = '1';
  return { ...env, ...extra };
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command to its end (its whole process group is killed after `timeoutMs`). */
export function run(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<RunResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      stderr += `\n[adoption test: killed after ${options.timeoutMs} ms]\n`;
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, options.timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Math.round(performance.now() - started) });
    });
  });
}

/** The output of a failed run, for an assertion message. */
export function describeRun(what: string, result: RunResult): string {
  const tail = (text: string): string => text.split('\n').slice(-60).join('\n');
  return `${what}: exit ${String(result.code)}${result.signal ? ` (${result.signal})` : ''} after ${result.ms} ms\n--- stdout ---\n${tail(result.stdout)}\n--- stderr ---\n${tail(result.stderr)}`;
}

/**
 * Copies fixture service `name` to a fresh directory outside the repository (nothing can resolve
 * from the repository's node_modules there) and installs the lifeline tarball plus the service's
 * own dependencies with npm; `editPackage` changes the copy's package.json first (a pinned version).
 */
export async function installService(
  name: string,
  tarball: string,
  editPackage?: (pkg: { dependencies?: Record<string, string> }) => void,
): Promise<{ dir: string; install: RunResult }> {
  const dir = await mkdtemp(join(tmpdir(), `lifeline-adoption-${name}-`));
  await cp(join(SERVICES_DIR, name), dir, { recursive: true });
  if (editPackage !== undefined) {
    const file = join(dir, 'package.json');
    const pkg = JSON.parse(await readFile(file, 'utf8')) as { dependencies?: Record<string, string> };
    editPackage(pkg);
    await writeFile(file, `${JSON.stringify(pkg, null, 2)}\n`);
  }
  const install = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], {
    cwd: dir,
    env: serviceEnv(),
    timeoutMs: 240_000,
  });
  if (install.code !== 0) throw new Error(describeRun(`npm install in ${dir}`, install));
  return { dir, install };
}

export async function removeDir(dir: string | undefined): Promise<void> {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
}

/**
 * A module put after `otel-lifeline/register` in NODE_OPTIONS: each Node process of a run appends
 * what OpenTelemetry's global API holds once register mode has started, so the test knows lifeline
 * really ran in the suite's processes (a run where register mode silently did nothing would prove
 * nothing).
 */
export const EVIDENCE_MODULE = `
import { appendFileSync } from 'node:fs';
// OpenTelemetry's global API registry, read directly: the service need not have an API of its own
// (lifeline brings its copy inside its package).
const api = globalThis[Symbol.for('opentelemetry.js.api.1')] ?? {};
const provider = api.trace;
const delegate = typeof provider?.getDelegate === 'function' ? provider.getDelegate() : provider;
appendFileSync(process.env.ADOPTION_EVIDENCE_FILE, JSON.stringify({
  pid: process.pid,
  argv: process.argv.slice(1),
  tracerProvider: delegate?.constructor.name ?? 'NoopTracerProvider',
  propagationFields: typeof api.propagation?.fields === 'function' ? api.propagation.fields() : [],
}) + '\\n');
`;

export interface Evidence {
  pid: number;
  argv: string[];
  tracerProvider: string;
  propagationFields: string[];
}

export async function readEvidence(file: string): Promise<Evidence[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Evidence);
}

/** A stand-in OTLP/HTTP collector on loopback: answers every export with an empty success, counts them. */
export async function startCollector(): Promise<{ endpoint: string; exports: () => number; close: () => Promise<void> }> {
  let exports = 0;
  const server = createHttpServer((req, res) => {
    req.resume().on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  const port = await listen(server);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    exports: () => exports,
    close: () => closeServer(server),
  };
}

/** An upstream that accepts connections and never answers: a call to it ends only by a deadline. */
export async function startSilentUpstream(): Promise<{ url: string; connections: () => number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createNetServer((socket) => {
    connections++;
    sockets.add(socket);
    socket
      .on('close', () => sockets.delete(socket))
      .on('error', () => undefined)
      .resume();
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await closeServer(server);
    },
  };
}

export function listen(server: HttpServer | NetServer, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      const address = server.address();
      if (typeof address !== 'object' || address === null) throw new Error('no address');
      resolve(address.port);
    });
  });
}

export function closeServer(server: HttpServer | NetServer): Promise<void> {
  return new Promise((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
}

export interface StartedService {
  child: ChildProcess;
  port: number;
  output: () => string;
  /** From the spawn to the `listening` line, in ms. */
  startupMs: number;
  /** The process's resident memory when it was listening, in MB (from /proc). */
  rssMb: number | undefined;
}

/**
 * Starts a service's entry point (`node [--import otel-lifeline/register] entry`) on port 0 and
 * resolves once it prints its `listening` line; rejects if it exits first or takes over `timeoutMs`.
 */
export function startService(dir: string, nodeArgs: string[], env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<StartedService> {
  const spawned = performance.now();
  const child = spawn(process.execPath, nodeArgs, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  return new Promise((resolve, reject) => {
    const fail = (why: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${why}; output:\n${output}`));
    };
    const timer = setTimeout(() => {
      fail(`no listening line within ${timeoutMs} ms`);
    }, timeoutMs);
    child.once('exit', (code, signal) => {
      fail(`the service exited (${String(code ?? signal)}) before listening`);
    });
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      const match = /"msg":"listening","port":(\d+)/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        child.removeAllListeners('exit');
        const startupMs = Math.round(performance.now() - spawned);
        resolve({ child, port: Number(match[1]), output: () => output, startupMs, rssMb: rssMb(child.pid) });
      }
    });
  });
}

/** The resident memory of process `pid`, in MB, from /proc (Linux); `undefined` elsewhere. */
function rssMb(pid: number | undefined): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Math.round(Number(kb) / 1024);
  } catch {
    return undefined;
  }
}
