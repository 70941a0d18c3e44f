import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { freePort, ROOT } from '../support/node.js';
import { otlpReceiver } from '../support/otlp-receiver.js';

/** Starts the app under register, waits for its first line, returns it with a way to await its exit. */
async function startApp(source: string, env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', '--input-type=module', '-e', source], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => {
      resolve({ code, signal, at: Date.now() });
    }),
  );
  return { child, exited };
}

const APP = (extra: string) => `
  import { trace } from '@opentelemetry/api';
  trace.getTracer('app').startSpan('work before SIGTERM').end();
  ${extra}
  setInterval(() => undefined, 1000); // an app that would run forever
  console.log('up');
`;

describe('SIGTERM (graceful shutdown)', () => {
  it('with an app handler: readiness 503 at once, liveness stays 200, spans flushed, the app decides when to exit', async () => {
    const receiver = await otlpReceiver();
    const port = await freePort();
    const { child, exited } = await startApp(APP(`process.on('SIGTERM', () => setTimeout(() => process.exit(0), 1500));`), {
      LIFELINE_PROBE_PORT: String(port),
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '60000', // nothing is exported unless the SIGTERM flush does it
    });
    try {
      expect((await fetch(`http://127.0.0.1:${port}/ready`)).status).toBe(200);
      const signalled = Date.now();
      child.kill('SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 200));
      const ready = await fetch(`http://127.0.0.1:${port}/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { unhealthy: string[] }).unhealthy).toEqual(['shutdown']);
      expect((await fetch(`http://127.0.0.1:${port}/live`)).status).toBe(200);
      await receiver.waitFor((spans) => spans.some((s) => s.name === 'work before SIGTERM'), 5_000);
      const exit = await exited;
      expect(exit.code).toBe(0); // the app's own handler ended it
      expect(exit.at - signalled).toBeGreaterThanOrEqual(1_400);
    } finally {
      child.kill('SIGKILL');
      await receiver.close();
    }
  });

  it('without an app handler: spans flushed, then the process exits by the signal, within the budget', async () => {
    const receiver = await otlpReceiver();
    const port = await freePort();
    const { child, exited } = await startApp(APP(''), {
      LIFELINE_PROBE_PORT: String(port),
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '60000',
    });
    try {
      const signalled = Date.now();
      child.kill('SIGTERM');
      const exit = await exited;
      expect(exit.signal).toBe('SIGTERM');
      expect(exit.at - signalled).toBeLessThan(5_000);
      expect(receiver.spans.some((s) => s.name === 'work before SIGTERM')).toBe(true);
    } finally {
      child.kill('SIGKILL');
      await receiver.close();
    }
  });
});
