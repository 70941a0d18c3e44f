import { spawn } from 'node:child_process';
import http from 'node:http';
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

  it('an app that fetches its own API over loopback keep-alive: every request it accepted before or during the drain is answered 200', async () => {
    // Several SIGTERM cycles of one service each: a loss happens in the instants the drain touches
    // the inner calls' pooled connections, so one cycle may miss it.
    const receiver = await otlpReceiver();
    const cycles: Cycle[] = [];
    try {
      for (let cycle = 0; cycle < 4; cycle++) cycles.push(await sigtermUnderLoad(receiver.endpoint));
    } finally {
      await receiver.close();
    }
    const sum = (pick: (cycle: Cycle) => number) => cycles.reduce((total, cycle) => total + pick(cycle), 0);
    const lost = cycles.flatMap((cycle) => cycle.lost);
    console.log(
      `self-calls under SIGTERM: ${cycles.length} cycles, ${sum((c) => c.answered)} answered 200 (${sum((c) => c.answeredAfterSignal)} after the signal), ${lost.length} lost${lost.length > 0 ? ` (${[...new Set(lost)].join('; ')})` : ''}; ${sum((c) => c.refused)} new connections refused (${[...new Set(cycles.flatMap((c) => c.refusals))].join(', ')}); exits after ${cycles.map((c) => c.exitMs).join(', ')} ms`,
    );
    expect(lost).toEqual([]);
    for (const cycle of cycles) {
      expect(cycle.signal).toBe('SIGTERM');
      expect(cycle.exitMs).toBeLessThan(5_000);
      expect(cycle.answeredAfterSignal, 'requests were in flight at SIGTERM').toBeGreaterThan(0);
    }
  }, 60_000);
});

interface Cycle {
  answered: number;
  answeredAfterSignal: number;
  /** Each request sent on an open connection and not answered 200: its answer, or its error. */
  lost: string[];
  /** Requests whose new connection the draining service refused (or reset before it took it). */
  refused: number;
  refusals: string[];
  signal: NodeJS.Signals | null;
  exitMs: number;
}

/**
 * Runs test/fixtures/self-calling-service.mjs under register, loads it from 20 keep-alive
 * connections (half its fetch route, half its node:http Agent route), sends SIGTERM mid-load and
 * keeps loading until it exits. A request on a kept-alive connection was the service's to answer;
 * one on a new connection may be refused once the drain began (node:http's `reusedSocket` tells
 * the two apart).
 */
async function sigtermUnderLoad(endpoint: string): Promise<Cycle> {
  const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'test/fixtures/self-calling-service.mjs'], {
    cwd: ROOT,
    env: {
      ...process.env,
      LIFELINE_PROBE_PORT: String(await freePort()),
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<{ signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (_code, signal) => {
      resolve({ signal, at: Date.now() });
    }),
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
  try {
    const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
    const { port } = JSON.parse(line) as { port: number };
    const cycle = { answered: 0, answeredAfterSignal: 0, lost: [] as string[], refused: 0, refusals: new Set<string>() };
    let signalledAt = 0;
    const send = (path: string) =>
      new Promise<{ status: number; body: string } | { error: NodeJS.ErrnoException; reused: boolean }>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port, path, agent }, (response) => {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (body += chunk));
          response.on('end', () => {
            resolve({ status: response.statusCode ?? 0, body });
          });
          response.on('error', (error) => {
            resolve({ error, reused: req.reusedSocket });
          });
        });
        req.on('error', (error) => {
          resolve({ error, reused: req.reusedSocket });
        });
      });
    const worker = async (path: string) => {
      // Bounded: a worker stops at its first error (once the drain began, its next connection is
      // refused) and after 5,000 requests at most.
      for (let sent = 0; sent < 5_000; sent++) {
        const outcome = await send(path);
        if ('error' in outcome) {
          const why = `${outcome.error.code ?? ''} ${outcome.error.message.replace(/ [\d.:]+$/, '')}`;
          if (outcome.reused) cycle.lost.push(`${path}: ${why} on a kept-alive connection`);
          else {
            cycle.refused++;
            cycle.refusals.add(why);
          }
          return;
        }
        if (outcome.status !== 200) {
          const at = /at (\d+)$/.exec(outcome.body)?.[1];
          cycle.lost.push(
            `${outcome.status} ${outcome.body.replace(/ at \d+$/, at === undefined ? '' : ` ${Number(at) - signalledAt} ms after SIGTERM`)}`,
          );
        } else if (signalledAt > 0) cycle.answeredAfterSignal++;
        else cycle.answered++;
      }
    };
    const load = Promise.all(Array.from({ length: 20 }, (_, i) => worker(i % 2 === 0 ? '/' : '/?via=agent')));
    // Under load first: the signal comes once 100 requests have been answered (or at most 10 s in).
    for (const end = Date.now() + 10_000; cycle.answered < 100 && Date.now() < end;)
      await new Promise((resolve) => setTimeout(resolve, 10));
    signalledAt = Date.now();
    child.kill('SIGTERM');
    const exit = await exited;
    await load;
    return {
      ...cycle,
      answered: cycle.answered + cycle.answeredAfterSignal,
      refusals: [...cycle.refusals],
      signal: exit.signal,
      exitMs: exit.at - signalledAt,
    };
  } finally {
    agent.destroy();
    child.kill('SIGKILL');
  }
}
