import { afterEach, describe, expect, it } from 'vitest';
import type * as Lifeline from '../../src/index.js';

// The built package (`npm test` builds first): the watchdog thread runs from its own compiled file.
const built = '../../dist/index.js';
const { HealthCatalog, startWatchdog } = (await import(built)) as typeof Lifeline;

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

describe('probes served by the watchdog thread', () => {
  it('answer from a verdict as soon as it changes, not a heartbeat later', async () => {
    const health = new HealthCatalog({ interval: 60_000 });
    // A beat every 250 ms: the verdicts a beat publishes would be up to 250 ms old.
    const watchdog = startWatchdog({
      thresholdMs: 5_000,
      exportSpans: false,
      logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
    });
    const probes = await watchdog.serveProbes(health, { port: 0, host: '127.0.0.1' });
    cleanup.push(
      () => {
        health.close();
      },
      () => watchdog.close(),
      () => probes.close(),
    );
    const live = async (): Promise<number> => (await fetch(`${probes.url}/live`)).status;
    // Twenty changes each way, each probed at once: a stale answer in any of them fails the test.
    for (let i = 0; i < 20; i++) {
      const component = health.registerLiveness(`worker-${String(i)}`);
      expect(await live()).toBe(503); // registered with a full buffer: unhealthy until a round
      component.take();
      health.runRound();
      expect(await live()).toBe(200);
      component.deregister();
    }
  });
});

describe('a block as the app is told of it', () => {
  it('startedAt is epoch ms, as every time lifeline hands a program', async () => {
    let told: (block: Lifeline.EventLoopBlock) => void = () => undefined;
    const block = new Promise<Lifeline.EventLoopBlock>((resolve) => {
      told = resolve;
    });
    const watchdog = startWatchdog({
      thresholdMs: 100,
      exportSpans: false,
      logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
      onBlock: (b) => {
        told(b);
      },
    });
    cleanup.push(() => watchdog.close());
    const began = Date.now();
    while (Date.now() - began < 600); // the block itself
    const { startedAt, blockedMs } = await block;
    expect(typeof startedAt).toBe('number');
    // When the loop stopped, as the thread measures it (to within its checks on a loaded machine):
    // an instant inside the 600 ms block's first half, not a string, not another clock.
    expect(startedAt).toBeGreaterThanOrEqual(began - 1_000);
    expect(startedAt).toBeLessThanOrEqual(began + 300);
    expect(blockedMs).toBeGreaterThanOrEqual(500);
  });
});
