import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { RetryingExporter } from '../../src/export/index.js';
import { OtlpHttpTraceExporter } from '../../src/export/otlp-http-exporter.js';
import { freePort } from '../support/node.js';
import { otlpReceiver } from '../support/otlp-receiver.js';
import { startService } from '../support/service.js';

describe('a collector that is down for a while', () => {
  it('costs no span: batches it refused are sent again, in order, once it is back', async () => {
    const port = await freePort(); // nothing listens yet: every export is refused
    const app = await startService(
      'test/fixtures/span-emitter.mjs',
      {
        OTEL_SERVICE_NAME: 'retry',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(port)}`,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_EXPORTER_OTLP_TIMEOUT: '300',
        LIFELINE_PROBE_PORT: '0',
        SPANS: '50',
        SPAN_EVERY_MS: '20',
      },
      ['--import', 'otel-lifeline/register'],
    );
    try {
      // All 50 spans end (in ~1 s); the exporter gives up on each batch within 300 ms, long before the collector comes up.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const receiver = await otlpReceiver(port);
      try {
        const spans = await receiver.waitFor((all) => all.filter((s) => s.service === 'retry').length >= 50, 20_000);
        const names = spans.filter((s) => s.service === 'retry').map((s) => s.name);
        expect(new Set(names).size).toBe(50);
        expect(names).toEqual(Array.from({ length: 50 }, (_, i) => `span-${String(i)}`)); // in order
        expect(app.stdout()).toContain('spans cannot be exported'); // the outage was said, once
      } finally {
        await receiver.close();
      }
    } finally {
      await app.stop();
    }
  });
});

describe('spans ended in tick work', () => {
  it('are exported after the tick deadline passed: the export does not inherit it', async () => {
    // Each tick calls an in-process server: its span ends in the work of a request whose inbound
    // deadline is the tick's, and the batch processor's timer runs in that context.
    const receiver = await otlpReceiver(0);
    const app = await startService(
      'test/fixtures/collector-service.mjs',
      {
        OTEL_SERVICE_NAME: 'ticks',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        LIFELINE_HEALTH_INTERVAL_MS: '100',
        LIFELINE_PROBE_PORT: '0',
        LIFELINE_LOG_LEVEL: 'warn',
        PORT: '0',
      },
      ['--import', 'otel-lifeline/register'],
    );
    try {
      const ticks = (all: { name: string; service: string }[]) =>
        all.filter((s) => s.service === 'ticks' && s.name === 'tick poller').length;
      await receiver.waitFor((all) => ticks(all) >= 30, 15_000);
      expect(app.stdout()).not.toContain('cannot be exported');
    } finally {
      await app.stop();
      await receiver.close();
    }
  });
});

describe('RetryingExporter bounds', () => {
  const quiet = { warn: () => undefined, info: () => undefined, debug: () => undefined };
  const spansNamed = (tracer: ReturnType<TracerProvider['getTracer']>, prefix: string, n: number): void => {
    for (let i = 0; i < n; i++) tracer.startSpan(`${prefix}-${String(i)}`).end();
  };

  it('keeps at most maxSpans for a collector that stays down, dropping (and counting) the oldest', async () => {
    const port = await freePort();
    const retrying = new RetryingExporter(
      new OtlpHttpTraceExporter('json', { url: `http://127.0.0.1:${String(port)}/v1/traces`, timeoutMillis: 200 }),
      quiet,
      {
        maxSpans: 10,
        initialBackoffMs: 60_000,
      },
    );
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: retrying })] });
    spansNamed(provider.getTracer('t'), 'down', 25);
    await eventually(() => retrying.dropped === 15);
    // Back up: the 10 newest arrive (a simple processor exports spans concurrently, so each failed alone).
    const receiver = await otlpReceiver(port);
    try {
      await retrying.forceFlush();
      expect(receiver.spans.map((s) => s.name).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `down-${String(i + 15)}`).sort());
    } finally {
      await provider.shutdown();
      await receiver.close();
    }
  });

  it('keeps at most maxBytes, however few the spans: big spans push the oldest out', async () => {
    const port = await freePort();
    const retrying = new RetryingExporter(
      new OtlpHttpTraceExporter('json', { url: `http://127.0.0.1:${String(port)}/v1/traces`, timeoutMillis: 200 }),
      quiet,
      {
        maxBytes: 1_000_000,
        initialBackoffMs: 60_000,
      },
    );
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: retrying })] });
    const tracer = provider.getTracer('t');
    const big = 'x'.repeat(100_000);
    for (let i = 0; i < 30; i++) tracer.startSpan(`big-${String(i)}`, { attributes: { 'app.payload': big } }).end();
    await eventually(() => retrying.dropped + retrying.buffered.spans === 30);
    expect(retrying.buffered.bytes).toBeLessThanOrEqual(1_000_000);
    expect(retrying.buffered.spans).toBe(9); // 9 × ~100 KB fit in 1 MB, a tenth would not
    expect(retrying.dropped).toBe(21);
    await provider.shutdown();
  });

  it('counts drops on the lifeline.export.dropped counter, by reason', async () => {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    });
    const meters = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meters);
    const port = await freePort();
    const retrying = new RetryingExporter(
      new OtlpHttpTraceExporter('json', { url: `http://127.0.0.1:${String(port)}/v1/traces`, timeoutMillis: 200 }),
      quiet,
      {
        maxSpans: 2,
        initialBackoffMs: 60_000,
      },
    );
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: retrying })] });
    try {
      spansNamed(provider.getTracer('t'), 'down', 5);
      await eventually(() => retrying.dropped === 3);
      await provider.shutdown(); // the 2 still kept cannot be sent: dropped at shutdown
      const { resourceMetrics } = await reader.collect();
      const points = resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .filter((metric) => metric.descriptor.name === 'lifeline.export.dropped')
        .flatMap((metric) => metric.dataPoints as { attributes: Record<string, unknown>; value: unknown }[]);
      const byReason = Object.fromEntries(points.map((point) => [String(point.attributes.reason), point.value]));
      expect(byReason).toEqual({ buffer_full: 3, shutdown: 2 });
    } finally {
      metrics.disable();
      await meters.shutdown();
    }
  });

  it('a batch dropped for room while it was being sent does not take the next one with it: every span is sent, dropped or kept, once', async () => {
    const port = await freePort();
    const retrying = new RetryingExporter(
      new OtlpHttpTraceExporter('json', { url: `http://127.0.0.1:${String(port)}/v1/traces`, timeoutMillis: 2_000 }),
      quiet,
      {
        maxSpans: 2,
        initialBackoffMs: 60_000,
      },
    );
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: retrying })] });
    const tracer = provider.getTracer('t');
    spansNamed(tracer, 'first', 1); // refused: kept
    await eventually(() => retrying.buffered.spans === 1);
    const receiver = await otlpReceiver(port, { answerAfterMs: 300 }); // back, but slow
    try {
      const flushing = retrying.forceFlush(); // sends first-0 …
      await new Promise((resolve) => setTimeout(resolve, 100));
      spansNamed(tracer, 'more', 2); // … while two more arrive: the buffer (2) drops first-0 for room
      await flushing;
      await retrying.forceFlush();
      const received = receiver.spans.map((s) => s.name);
      expect(received.filter((name) => name === 'first-0')).toHaveLength(1); // sent before it was dropped
      expect(received).toEqual(expect.arrayContaining(['more-0', 'more-1'])); // not lost with it
      expect(received.length + retrying.buffered.spans).toBe(3);
      expect(retrying.dropped).toBe(3 - received.length - retrying.buffered.spans); // first-0 arrived: not counted as dropped
    } finally {
      await provider.shutdown();
      await receiver.close();
    }
  });

  it('refuses a bound that is not a positive integer, naming it', () => {
    const exporter = new OtlpHttpTraceExporter('json');
    expect(() => new RetryingExporter(exporter, quiet, { maxBytes: 0 })).toThrow(/exportBuffer\.maxBytes/);
    expect(() => new RetryingExporter(exporter, quiet, { maxSpans: 1.5 })).toThrow(/exportBuffer\.maxSpans/);
  });

  it('does not retry what the collector refuses for good (HTTP 400): dropped and counted', async () => {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(400).end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const retrying = new RetryingExporter(new OtlpHttpTraceExporter('json', { url: `http://127.0.0.1:${String(port)}/v1/traces` }), quiet, {
      initialBackoffMs: 10,
    });
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: retrying })] });
    try {
      spansNamed(provider.getTracer('t'), 'bad', 3);
      await eventually(() => retrying.dropped === 3);
      await retrying.forceFlush();
      expect(retrying.dropped).toBe(3);
    } finally {
      await provider.shutdown();
      server.close();
    }
  });
});

async function eventually(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
