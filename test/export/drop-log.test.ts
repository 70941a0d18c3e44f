import { metrics } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RetryingExporter, batchProcessorFromEnv } from '../../src/export/index.js';
import { endedSpans, exportThrough, FakeCollector, REFUSED, warnings } from './support.js';

afterEach(() => {
  vi.useRealTimers();
});

const dropLines = (lines: ReturnType<typeof warnings>['lines']) => lines.filter((line) => line.msg.includes('spans dropped'));
const logged = (lines: ReturnType<typeof warnings>['lines']) => dropLines(lines).map((line) => line.fields.dropped);

describe('the drop log line', () => {
  it('says every drop: the first at once, those of the quiet minute when it ends, the last ones at shutdown', async () => {
    vi.useFakeTimers();
    const { logger, lines } = warnings();
    const retrying = new RetryingExporter(new FakeCollector(REFUSED), logger, { maxSpans: 1 });
    const send = (prefix: string, n: number): void => {
      for (const span of endedSpans(prefix, n)) retrying.export([span], () => undefined);
    };

    send('burst', 11); // the first is kept; each next pushes the one before out: 10 dropped in a burst
    expect(retrying.dropped).toBe(10);
    expect(logged(lines)).toEqual([1]); // the first drop, said at once

    await vi.advanceTimersByTimeAsync(60_000); // the quiet minute ends: its 9 drops are said
    expect(logged(lines)).toEqual([1, 9]);
    expect(dropLines(lines)[1]?.fields).toMatchObject({ reasons: { buffer_full: 9 }, droppedTotal: 10, kept: 1 });

    await vi.advanceTimersByTimeAsync(60_000); // a minute with nothing to say: the next drop is said at once
    expect(logged(lines)).toEqual([1, 9]);
    send('again', 5);
    expect(logged(lines)).toEqual([1, 9, 1]);

    send('last', 2); // within the quiet minute, as the 4 before: said at shutdown, with the span still kept
    expect(logged(lines)).toEqual([1, 9, 1]);
    await retrying.shutdown();
    expect(logged(lines)).toEqual([1, 9, 1, 7]);
    expect(dropLines(lines)[3]?.fields).toMatchObject({ reasons: { buffer_full: 6, shutdown: 1 }, droppedTotal: 18, kept: 0 });
    expect(retrying.dropped).toBe(18);
    expect(logged(lines).reduce((sum: number, n) => sum + Number(n), 0)).toBe(retrying.dropped);
  });

  it('a pending line does not keep the process alive: its timer is unref’ed', () => {
    const { logger } = warnings();
    const retrying = new RetryingExporter(new FakeCollector(REFUSED), logger, { maxSpans: 1 });
    const spy = vi.spyOn(globalThis, 'setTimeout');
    try {
      for (const span of endedSpans('s', 3)) retrying.export([span], () => undefined);
      const timers = spy.mock.results.map((result) => result.value as NodeJS.Timeout);
      const quietMinute = spy.mock.calls.findIndex((call) => call[1] === 60_000);
      expect(quietMinute).toBeGreaterThanOrEqual(0);
      expect(timers[quietMinute]?.hasRef()).toBe(false);
    } finally {
      spy.mockRestore();
      void retrying.shutdown();
    }
  });
});

describe("the batch processor's queue, full while an export hangs (a blackholed collector)", () => {
  it('drops counted on lifeline.export.dropped (reason queue_full) and said in the drop line', async () => {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    });
    const meters = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meters);
    const { logger, lines } = warnings();
    const collector = new FakeCollector('hold'); // never answers until released
    const retrying = new RetryingExporter(collector, logger);
    const processor = batchProcessorFromEnv(retrying, { maxQueueSize: 4, maxExportBatchSize: 2, scheduledDelayMillis: 60_000 });
    const provider = new TracerProvider({ spanProcessors: [processor] });
    try {
      const tracer = provider.getTracer('t');
      // 2 go out in a batch (and hang), 4 fill the queue, 4 find it full.
      for (let i = 0; i < 10; i++) tracer.startSpan(`s-${String(i)}`).end();
      expect(collector.calls).toHaveLength(1);
      expect(retrying.dropped).toBe(4);
      expect(dropLines(lines).map((line) => line.fields)).toEqual([expect.objectContaining({ dropped: 1, reasons: { queue_full: 1 } })]);

      collector.answer = { code: ExportResultCode.SUCCESS };
      collector.release({ code: ExportResultCode.SUCCESS });
      await provider.shutdown(); // the queued 4 are sent; the 3 drops of the quiet minute are said
      expect(collector.calls.flatMap((call) => call.names)).toEqual(['s-0', 's-1', 's-2', 's-3', 's-4', 's-5']);
      expect(logged(lines)).toEqual([1, 3]);
      expect(dropLines(lines)[1]?.fields).toMatchObject({ reasons: { queue_full: 3 }, droppedTotal: 4 });

      const { resourceMetrics } = await reader.collect();
      const points = resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .filter((metric) => metric.descriptor.name === 'lifeline.export.dropped')
        .flatMap((metric) => metric.dataPoints as { attributes: Record<string, unknown>; value: unknown }[]);
      expect(Object.fromEntries(points.map((point) => [String(point.attributes.reason), point.value]))).toEqual({ queue_full: 4 });
    } finally {
      metrics.disable();
      await meters.shutdown();
    }
  });
});

describe('an export under way at shutdown that then fails', () => {
  it('is counted and said as dropped at shutdown, not kept for a retry that never comes', async () => {
    const { logger, lines } = warnings();
    const collector = new FakeCollector('hold');
    const retrying = new RetryingExporter(collector, logger);
    const exported = exportThrough(retrying, endedSpans('late', 3));
    await retrying.shutdown();
    collector.release(REFUSED); // the collector went away: a retryable failure, once shutdown is over
    await exported;
    expect(retrying.dropped).toBe(3);
    expect(dropLines(lines).map((line) => line.fields)).toEqual([expect.objectContaining({ dropped: 3, reasons: { shutdown: 3 } })]);
  });
});
