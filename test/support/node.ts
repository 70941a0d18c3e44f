import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface NodeResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/**
 * Runs an ES module snippet in a fresh Node process from the repository root, so it imports the
 * built package through its own `exports` map (`import … from 'otel-lifeline'`), as a user would.
 */
export function runModule(source: string, options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<NodeResult> {
  return runNode(['--input-type=module', '-e', source], options);
}

/** Runs `node args…` with the test's own Node (24, pinned by the package), capturing output. */
export function runNode(args: string[], options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<NodeResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
    }, options.timeoutMs ?? 10_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** A TCP port that was free a moment ago, for servers started in a child process. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

/** Ends a child process with `signal` and resolves once it is gone (at once if it already is). */
export function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve();
      return;
    }
    child.once('exit', () => {
      resolve();
    });
    child.kill(signal);
  });
}
