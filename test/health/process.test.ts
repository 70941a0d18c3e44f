import { describe, expect, it } from 'vitest';
import { runModule } from '../support/node.js';

describe('a catalog in a real process', () => {
  it('never keeps the process alive (the timer is unref-ed)', async () => {
    const result = await runModule(`
      import { HealthCatalog } from 'otel-lifeline';
      const health = new HealthCatalog({ interval: 50 });
      const h = health.registerLiveness('poller');
      h.take();
      console.log('registered');
    `);
    expect(result.stderr).toBe('');
    expect(result.stdout.trim()).toBe('registered');
    expect(result.code).toBe(0);
    expect(result.ms).toBeLessThan(8_000); // the kill timer is 10 s: exiting at all is the point
  });

  it('carries deadlines with no SDK started: the first use registers a context manager', async () => {
    const result = await runModule(`
      import { context } from '@opentelemetry/api';
      import { withTimeout, currentDeadline } from 'otel-lifeline';
      const before = context.with(context.active().setValue(Symbol.for('k'), 1), () => context.active().getValue(Symbol.for('k')));
      const source = await withTimeout(1000, async () => {
        await new Promise((r) => setTimeout(r, 5));
        return currentDeadline()?.source;
      });
      console.log(JSON.stringify({ before: before ?? null, source }));
    `);
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ before: null, source: 'scope' });
  });

  it('importing lifeline changes no global', async () => {
    const result = await runModule(`
      import { context } from '@opentelemetry/api';
      import 'node:http'; // Node's own http module sets undici's global dispatcher symbols on load
      const otel = () => Object.keys(globalThis[Symbol.for('opentelemetry.js.api.1')] ?? {}).join(',');
      const globals = () => JSON.stringify([Object.getOwnPropertySymbols(globalThis).map(String).sort(), otel()]);
      const before = globals();
      const lifeline = await import('otel-lifeline');
      const carried = context.with(context.active().setValue(Symbol.for('k'), 1), () => context.active().getValue(Symbol.for('k')));
      console.log(JSON.stringify({ same: before === globals(), carried: carried ?? null, health: typeof lifeline.health.status }));
    `);
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ same: true, carried: null, health: 'function' });
  });

  it('the process-wide health takes its interval from LIFELINE_HEALTH_INTERVAL_MS', async () => {
    const result = await runModule(`import { health } from 'otel-lifeline'; console.log(health.interval, health.maxMissedTicks);`, {
      env: { ...process.env, LIFELINE_HEALTH_INTERVAL_MS: '250' },
    });
    expect(result.stdout.trim()).toBe('250 2');
  });
});
