import { spawn } from 'node:child_process';

/** How a job that ends on its own ended. */
export interface JobExit {
  code: number | null;
  /** From the job's `done` line to its `exit` line (both printed by the job, with its clock), in ms. */
  exitDelayMs: number;
  /** Its stdout and stderr, interleaved. */
  output: string;
}

/**
 * Runs `node [...nodeArgs] script` in `cwd` to its end (killed after a minute). The job prints
 * `{"msg":"done","at":…}` when its own work is done and `{"msg":"exit","at":…}` from its `exit`
 * handler, so the delay is measured inside it, not by a watcher that may be busy itself.
 */
export function runJob(script: string, nodeArgs: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<JobExit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, script], { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    // 'close' comes after the output's end: all of it is read.
    child.on('close', (code) => {
      clearTimeout(timer);
      const done = /\{"msg":"done","at":(\d+)\}/.exec(output);
      const exit = /\{"msg":"exit","at":(\d+)\}/.exec(output);
      resolve({
        code,
        exitDelayMs: done?.[1] === undefined || exit?.[1] === undefined ? Number.NaN : Number(exit[1]) - Number(done[1]),
        output,
      });
    });
  });
}
