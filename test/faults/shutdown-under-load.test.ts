import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { freePort, ROOT } from '../support/node.js';
import { otlpReceiver } from '../support/otlp-receiver.js';

const SERVER = 2;

describe('SIGTERM under load (issue 6: shutdown)', () => {
  it('readiness 503 at once, liveness 200 until exit, ended spans exported, exit within the budget', async () => {
    // A collector that takes 400 ms per export keeps the shutdown open long enough to probe it.
    const receiver = await otlpReceiver(0, { answerAfterMs: 400 });
    const probePort = await freePort();
    const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'test/fixtures/load-service.mjs'], {
      cwd: ROOT,
      env: {
        ...process.env,
        OTEL_SERVICE_NAME: 'load',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '60000', // only lifeline's SIGTERM flush exports anything
        OTEL_BSP_MAX_QUEUE_SIZE: '100000',
        LIFELINE_PROBE_PORT: String(probePort),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<{ signal: NodeJS.Signals | null; at: number }>((resolve) =>
      child.once('exit', (_code, signal) => {
        resolve({ signal, at: Date.now() });
      }),
    );
    const { port } = JSON.parse(await new Promise<string>((resolve) => createInterface({ input: child.stdout }).once('line', resolve))) as {
      port: number;
    };
    const agent = new Agent({ connections: 20 });
    let completed = 0;
    let notOk = 0;
    let stopLoad = false;
    let warm: () => void = () => undefined;
    const warmed = new Promise<void>((resolve) => (warm = resolve));
    const load = Promise.all(
      Array.from({ length: 20 }, async () => {
        while (!stopLoad) {
          try {
            const response = await request(`http://127.0.0.1:${port}/`, { dispatcher: agent });
            await response.body.text();
            completed++;
            if (response.statusCode !== 200) notOk++; // its call to the in-process upstream was cut
            if (completed === 150) warm();
          } catch {
            return; // the process is gone
          }
        }
      }),
    );
    try {
      await warmed; // under load (however slow a loaded machine makes it)
      const completedBeforeSignal = completed;
      expect(completedBeforeSignal).toBeGreaterThan(100);
      const signalled = Date.now();
      child.kill('SIGTERM');
      // Probe both until the process is gone: readiness must fail as soon as the service has taken
      // the signal, and from then on, liveness must never. The probes are answered by the watchdog
      // thread at once, while the signal waits for the service's busy event loop: an answer in the
      // first milliseconds may still precede it.
      const ready: number[] = [];
      const live: number[] = [];
      let firstReadyMs = -1;
      let firstFailMs = -1;
      for (;;) {
        const [r = 0, l = 0] = await Promise.all(
          ['ready', 'live'].map((path) =>
            fetch(`http://127.0.0.1:${probePort}/${path}`).then(
              (res) => res.status,
              () => 0,
            ),
          ),
        );
        if (r === 0 && l === 0) break;
        if (r !== 0) {
          ready.push(r);
          if (firstReadyMs < 0) firstReadyMs = Date.now() - signalled;
          if (r === 503 && firstFailMs < 0) firstFailMs = Date.now() - signalled;
        }
        if (l !== 0) live.push(l);
      }
      stopLoad = true;
      const exit = await exited;
      await load;
      expect(ready.length).toBeGreaterThan(0);
      const failedFrom = ready.indexOf(503);
      const answers = `readiness answers after SIGTERM: ${ready.join(' ')}`;
      expect(failedFrom, answers).toBeGreaterThanOrEqual(0);
      expect(
        ready.slice(0, failedFrom).every((s) => s === 200),
        answers,
      ).toBe(true); // before the service took the signal
      expect(
        ready.slice(failedFrom).every((s) => s === 503),
        answers,
      ).toBe(true); // and never passing again
      expect(firstFailMs, answers).toBeLessThan(1_000);
      expect(live.every((s) => s === 200)).toBe(true);
      expect(exit.signal).toBe('SIGTERM');
      expect(exit.at - signalled).toBeLessThan(5_000 + 1_000); // shutdownTimeoutMs + margin
      // The service's own server spans (its in-process upstream has server spans too).
      const serverSpans = receiver.spans.filter(
        (s) => s.service === 'load' && s.kind === SERVER && (s.attributes['server.port'] ?? s.attributes['net.host.port']) === port,
      ).length;
      // Every request answered before the signal had ended its span: all of those were exported.
      expect(serverSpans).toBeGreaterThanOrEqual(completedBeforeSignal);
      // The app's server stopped taking requests and let those in flight finish before the last
      // flush: every answered request's span was exported.
      const lost = Math.max(0, completed - serverSpans);
      expect(lost).toBe(0);
      // Each request in flight finished its call to the upstream the drain was closing too.
      expect(notOk).toBe(0);
      console.log(
        `shutdown under load: ${completedBeforeSignal} requests before SIGTERM, ${completed} answered in all, ${serverSpans} server spans exported (${lost} lost); readiness 503 after ${firstFailMs} ms (${failedFrom} answers of 200 before it, first answer after ${firstReadyMs} ms); exit after ${exit.at - signalled} ms; ${ready.length} readiness and ${live.length} liveness probes during shutdown`,
      );
    } finally {
      stopLoad = true;
      child.kill('SIGKILL');
      await agent.close();
      await receiver.close();
    }
  }, 60_000);
});
