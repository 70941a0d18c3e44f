import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ROOT, stopChild } from './node.js';

/** A Node service started in its own process; it prints `{"port":N}` on its first stdout line. */
export interface ChildService {
  url: string;
  /** Its first stdout line, parsed. */
  first: Record<string, unknown>;
  /** What it printed after its first line. */
  stdout: () => string;
  stderr: () => string;
  /** SIGTERM, and resolves once it exited. */
  stop: () => Promise<void>;
  /** Sends `signal`, and resolves once it exited (the signal must end it). */
  kill: (signal: NodeJS.Signals) => Promise<void>;
  /** How it exited, once it has (by itself or stopped). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export async function startService(script: string, env: NodeJS.ProcessEnv, nodeArgs: string[] = []): Promise<ChildService> {
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
    }),
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  let stdout = '';
  const first = await new Promise<Record<string, unknown>>((resolve, reject) => {
    lines.once('line', (line) => {
      resolve(JSON.parse(line) as Record<string, unknown>);
      lines.on('line', (more) => (stdout += `${more}\n`));
    });
    child.once('exit', (code) => {
      reject(new Error(`${script} exited with ${String(code)} before listening: ${stderr}`));
    });
  });
  return {
    url: `http://127.0.0.1:${String(first.port)}`,
    first,
    stdout: () => stdout,
    stderr: () => stderr,
    stop: () => stopChild(child),
    kill: (signal) => stopChild(child, signal),
    exited,
  };
}
