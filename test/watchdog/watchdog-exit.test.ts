import type { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type * as Lifeline from '../../src/index.js';

// The built package (`npm test` builds first): the watchdog thread runs from its own compiled file.
const built = '../../dist/index.js';
const { HealthCatalog, startWatchdog } = (await import(built)) as typeof Lifeline;

// Only records each Worker made, so the test can end the watchdog thread as a crash would.
const { workers } = vi.hoisted(() => ({ workers: [] as Worker[] }));
vi.mock('node:worker_threads', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:worker_threads')>();
  class RecordedWorker extends real.Worker {
    constructor(...args: ConstructorParameters<typeof real.Worker>) {
      super(...args);
      workers.push(this);
    }
  }
  return { ...real, Worker: RecordedWorker };
});

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** Cleans up after the test, in reverse order: the probes, the watchdog, the catalog. */
function closeAll(health: Lifeline.HealthCatalog, watchdog: Lifeline.Watchdog, probes: Lifeline.ProbeServer): void {
  cleanup.push(
    () => {
      health.close();
    },
    () => watchdog.close(),
    () => probes.close(),
  );
}

/** Ends the latest watchdog thread as a crash would, and waits until it is gone. */
async function endThread(): Promise<void> {
  const thread = workers.at(-1);
  const exited = new Promise((resolve) => thread?.once('exit', resolve));
  await thread?.terminate();
  await exited;
}

describe('the watchdog thread exits on its own (a crash, its heap limit)', () => {
  it('the probes it served are served from the main thread again, on the same port; it says so', async () => {
    const lines: string[] = [];
    const logger: Lifeline.Logger = { warn: (_obj, msg) => lines.push(msg), info: () => undefined, debug: () => undefined };
    const health = new HealthCatalog({ interval: 60_000 });
    const watchdog = startWatchdog({ thresholdMs: 1_000, exportSpans: false, logger });
    const probes = await watchdog.serveProbes(health, { port: 0, host: '127.0.0.1' });
    closeAll(health, watchdog, probes);
    const live = () =>
      fetch(`${probes.url}/live`).then(
        (r) => r.status,
        () => 0,
      );
    expect(await live()).toBe(200);

    await endThread();
    let status = await live();
    const until = Date.now() + 5_000;
    while (status !== 200 && Date.now() < until) status = await new Promise((resolve) => setTimeout(resolve, 20)).then(live);
    expect(status).toBe(200);
    expect(lines).toContain(
      'lifeline: the watchdog thread exited; blocked event loops are not reported, and probes are served on the main thread',
    );
    // Closing the watchdog closes what took its place.
    await watchdog.close();
    expect(await live()).toBe(0);
  });

  it('gone before it was asked to serve: the probes are served on the main thread', async () => {
    const health = new HealthCatalog({ interval: 60_000 });
    const watchdog = startWatchdog({
      thresholdMs: 1_000,
      exportSpans: false,
      logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
    });
    await endThread();
    const probes = await watchdog.serveProbes(health, { port: 0, host: '127.0.0.1' });
    closeAll(health, watchdog, probes);
    expect(await fetch(`${probes.url}/live`).then((r) => r.status)).toBe(200);
  });
});
