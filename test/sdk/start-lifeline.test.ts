import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { runModule } from '../support/node.js';
import { HealthCatalog } from '../../src/index.js';
import { startLifeline, type Lifeline } from '../../src/sdk/index.js';

let lifeline: Lifeline | undefined;
afterEach(async () => {
  await lifeline?.shutdown();
  lifeline = undefined;
});

describe('startLifeline (docs/getting-started.md)', () => {
  it('starts the SDK, the probe server and the catalog; ticks reach the exporter', async () => {
    const exporter = new InMemorySpanExporter();
    const health = new HealthCatalog({ interval: 60_000 });
    lifeline = await startLifeline({
      serviceName: 'svc',
      spanProcessors: [new SimpleSpanProcessor({ exporter })],
      health,
      probe: { port: 0 },
    });
    expect(lifeline.health).toBe(health);
    const h = health.registerLiveness('poller');
    await h.take()?.run(async () => {
      trace.getTracer('app').startSpan('work').end();
      await Promise.resolve();
    });
    await lifeline.forceFlush();
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name).sort()).toEqual(['tick poller', 'work']);
    expect(spans[0]?.resource.attributes['service.name']).toBe('svc');
    const res = await fetch(`${lifeline.probe?.url ?? ''}/live`);
    expect(res.status).toBe(503); // poller has not had a round yet
  });

  it('probe: false starts no probe server; shutdown is idempotent and closes the catalog', async () => {
    const health = new HealthCatalog();
    lifeline = await startLifeline({ spanProcessors: [], health, probe: false });
    expect(lifeline.probe).toBeUndefined();
    await Promise.all([lifeline.shutdown(), lifeline.shutdown()]);
    expect(() => health.registerLiveness('late')).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
  });

  it('a probe port in use fails the start and leaves nothing running: it can start again', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      await expect(startLifeline({ spanProcessors: [], health: new HealthCatalog(), probe: { port } })).rejects.toMatchObject({
        code: 'EADDRINUSE',
      });
      lifeline = await startLifeline({ spanProcessors: [], health: new HealthCatalog(), probe: false });
    } finally {
      taken.close();
    }
  });

  it('a start refused for a bad option leaves no watchdog thread behind (the thread starts while the SDK loads)', async () => {
    // The built package (the thread's script exists only there): after the refused start, a 400 ms
    // block past a 50 ms threshold must not be reported by an orphaned thread.
    const result = await runModule(
      `import { startLifeline } from 'otel-lifeline/sdk';
       const err = await startLifeline({ probe: false, propagation: { minInboundMs: -5 }, watchdog: { thresholdMs: 50 } }).catch((e) => e);
       console.log('refused', err.code);
       const until = Date.now() + 400;
       while (Date.now() < until);
       await new Promise((resolve) => setTimeout(resolve, 300));
       console.log('done');`,
      { env: { ...process.env, OTEL_TRACES_EXPORTER: 'none' } },
    );
    expect(result.stdout).toContain('refused ERR_INVALID_OPTION');
    expect(result.stdout).toContain('done');
    expect(result.stdout).not.toContain('event loop blocked');
  });

  it('a second start in the same process is refused while the first runs', async () => {
    lifeline = await startLifeline({ spanProcessors: [], health: new HealthCatalog(), probe: false });
    await expect(startLifeline({ spanProcessors: [], probe: false })).rejects.toMatchObject({
      name: 'LifelineError',
      code: 'ERR_ALREADY_STARTED',
    });
  });
});
