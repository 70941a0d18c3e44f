import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { currentDeadline, DeadlineExceededError, HealthCatalog, LifelineError, withTimeout } from '../../src/index.js';
import { memoryTracing, sleep } from '../support/tracing.js';

const catalogs: HealthCatalog[] = [];
function setup(options: { interval?: number; maxMissedTicks?: number } = {}) {
  const tracing = memoryTracing();
  const health = new HealthCatalog({ ...options, tracerProvider: tracing.provider });
  catalogs.push(health);
  return { health, spans: tracing.spans, tracer: tracing.provider.getTracer('test') };
}
afterEach(() => {
  for (const health of catalogs.splice(0)) health.close();
});

describe('tick spans (docs/concepts.md)', () => {
  it('one span per taken tick, named and attributed, ended when run settles', async () => {
    const { health, spans } = setup({ interval: 1_000, maxMissedTicks: 2 });
    const h = health.registerLiveness('poller');
    const tick = h.take();
    if (tick === undefined) throw new Error('no tick');
    await tick.run(async () => {
      await sleep(5);
    });
    const [span, ...rest] = spans();
    expect(rest).toEqual([]);
    expect(span?.name).toBe('tick poller');
    expect(span?.kind).toBe(SpanKind.INTERNAL);
    expect(span?.instrumentationScope.name).toBe('lifeline');
    expect(span?.attributes).toMatchObject({
      'lifeline.health.component': 'poller',
      'lifeline.health.probe': 'liveness',
      'lifeline.health.tick': 1,
      'lifeline.deadline.at': new Date(tick.deadline).toISOString(),
      'lifeline.deadline.source': 'tick',
    });
    const budget = span?.attributes['lifeline.deadline.budget_ms'] as number;
    expect(budget).toBeGreaterThan(900);
    expect(budget).toBeLessThanOrEqual(1_000);
    expect(span?.status.code).toBe(SpanStatusCode.UNSET);
    expect(span?.attributes['lifeline.deadline.exceeded']).toBeUndefined();
  });

  it('records the probe kind of readiness and startup components', () => {
    const { health, spans } = setup();
    health
      .registerReadiness('r')
      .take()
      ?.run(() => 0);
    health
      .registerStartup('s')
      .take()
      ?.run(() => 0);
    expect(spans().map((s) => s.attributes['lifeline.health.probe'])).toEqual(['readiness', 'startup']);
  });

  it('work inside run is a child of the tick span; each tick is the root of its own trace', async () => {
    const { health, spans, tracer } = setup();
    const h = health.registerLiveness('worker');
    const outer = tracer.startSpan('request handler');
    // Even when taken inside another span's context, a tick starts a new trace.
    await context.with(trace.setSpan(context.active(), outer), async () => {
      for (const tick of [h.take(), h.take()]) {
        await tick?.run(async () => {
          await sleep(1);
          tracer.startSpan('work').end();
        });
      }
    });
    outer.end();
    const ticks = spans().filter((s) => s.name === 'tick worker');
    const work = spans().filter((s) => s.name === 'work');
    expect(ticks).toHaveLength(2);
    expect(work).toHaveLength(2);
    for (const [i, tick] of ticks.entries()) {
      expect(tick.parentSpanContext).toBeUndefined();
      expect(work[i]?.spanContext().traceId).toBe(tick.spanContext().traceId);
      expect(work[i]?.parentSpanContext?.spanId).toBe(tick.spanContext().spanId);
    }
    expect(ticks[0]?.spanContext().traceId).not.toBe(ticks[1]?.spanContext().traceId);
    expect(ticks[0]?.spanContext().traceId).not.toBe(outer.spanContext().traceId);
  });

  it('work that ends after the deadline ends the span with ERROR and lifeline.deadline.exceeded', async () => {
    const { health, spans } = setup({ interval: 20, maxMissedTicks: 1 });
    const h = health.registerLiveness('slow');
    const tick = h.take();
    await tick?.run(() => sleep(60));
    const span = spans().find((s) => s.name === 'tick slow');
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
  });

  it('a run that throws or rejects records the error and passes it on', async () => {
    const { health, spans } = setup();
    const h = health.registerLiveness('failing');
    expect(() => {
      h.take()?.run(() => {
        throw new Error('sync boom');
      });
    }).toThrow('sync boom');
    await expect(h.take()?.run(() => Promise.reject(new Error('async boom')))).rejects.toThrow('async boom');
    expect(spans().map((s) => [s.status.code, s.status.message, s.events[0]?.name])).toEqual([
      [SpanStatusCode.ERROR, 'sync boom', 'exception'],
      [SpanStatusCode.ERROR, 'async boom', 'exception'],
    ]);
  });

  it('a tick never run ends when the next tick is taken, or when the handle goes', () => {
    const { health, spans } = setup();
    const h = health.registerLiveness('idle');
    h.take();
    expect(spans()).toHaveLength(0);
    h.take();
    expect(spans().map((s) => s.attributes['lifeline.health.tick'])).toEqual([1]);
    h.deregister();
    expect(spans().map((s) => s.attributes['lifeline.health.tick'])).toEqual([1, 2]);
  });

  it('a tick is run at most once', () => {
    const { health } = setup();
    const tick = health.registerLiveness('once').take();
    tick?.run(() => 1);
    expect(() => tick?.run(() => 2)).toThrow(LifelineError);
    expect(() => tick?.run(() => 2)).toThrow(expect.objectContaining({ code: 'ERR_TICK_ALREADY_RUN' }));
  });

  it('run carries the tick deadline in the context (source tick) and returns fn result', async () => {
    const { health } = setup({ interval: 5_000 });
    const tick = health.registerLiveness('d').take();
    const seen = await tick?.run(async () => {
      await sleep(1);
      const deadline = currentDeadline();
      return { at: deadline?.at, source: deadline?.source, remaining: deadline?.remainingMs() };
    });
    expect(seen?.at).toBe(tick?.deadline);
    expect(seen?.source).toBe('tick');
    expect(seen?.remaining).toBeGreaterThan(4_000);
    expect(currentDeadline()).toBeUndefined();
  });

  it('a tick run inside a tighter scope keeps the tighter deadline', () => {
    const { health } = setup({ interval: 60_000 });
    const tick = health.registerLiveness('nested').take();
    const deadline = withTimeout(100, () => tick?.run(() => currentDeadline()));
    expect(deadline?.source).toBe('scope');
    expect(deadline?.at).toBeLessThan(tick?.deadline ?? 0);
  });

  it('tick.signal aborts at the deadline with a DeadlineExceededError', async () => {
    const { health } = setup({ interval: 30, maxMissedTicks: 1 });
    const tick = health.registerLiveness('sig').take();
    const signal = tick?.signal;
    expect(signal?.aborted).toBe(false);
    await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
    expect(Date.now()).toBeGreaterThanOrEqual(tick?.deadline ?? Infinity);
    expect(signal?.reason).toBeInstanceOf(DeadlineExceededError);
    expect(signal?.reason).toMatchObject({ deadline: tick?.deadline, source: 'tick', code: 'ERR_DEADLINE_EXCEEDED' });
  });

  it('a settled run releases the tick timer: the signal does not fire later', async () => {
    const { health } = setup({ interval: 30, maxMissedTicks: 1 });
    const tick = health.registerLiveness('released').take();
    const signal = tick?.run(() => tick.signal);
    await sleep(80);
    expect(signal?.aborted).toBe(false);
  });
});
