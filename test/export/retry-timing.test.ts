import * as grpc from '@grpc/grpc-js';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RetryingExporter } from '../../src/export/index.js';
import { OtlpGrpcTraceExporter } from '../../src/export/otlp-grpc-exporter.js';
import { retryAdvice } from '../../src/export/retry-advice.js';
import { freePort } from '../support/node.js';
import { endedSpans, exportThrough, FakeCollector, REFUSED, warnings } from './support.js';

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** Math.random answers `values` in turn (then the last one again). */
function randomAnswers(...values: number[]): void {
  let i = 0;
  vi.spyOn(Math, 'random').mockImplementation(() => values[Math.min(i++, values.length - 1)] ?? 0.5);
}

/** The delays between the exports `collector` saw. */
const gaps = (collector: FakeCollector): number[] => collector.calls.slice(1).map((call, i) => call.at - (collector.calls[i]?.at ?? 0));

describe('retry backoff', () => {
  it('is jittered by ±20 %, so a fleet does not retry in lockstep after a collector restart', async () => {
    vi.useFakeTimers();
    const spans = endedSpans('s', 1); // before Math.random is mocked: span ids are drawn from it
    randomAnswers(0, 1, 0.5, 1);
    const collector = new FakeCollector(REFUSED);
    const retrying = new RetryingExporter(collector, warnings().logger, { initialBackoffMs: 500, maxBackoffMs: 3_000 });
    retrying.export(spans, () => undefined);
    await vi.advanceTimersByTimeAsync(20_000);
    // 500 ms × 0.8, 1 s × 1.2, 2 s × 1, then 4 s × 1.2 capped at 3 s (and the cap from then on).
    expect(gaps(collector).slice(0, 5)).toEqual([400, 1_200, 2_000, 3_000, 3_000]);
    await retrying.shutdown();
  });

  it('two exporters failing together retry apart', async () => {
    vi.useFakeTimers();
    const spans = endedSpans('s', 1);
    randomAnswers(0.1, 0.9);
    const [a, b] = [new FakeCollector(REFUSED), new FakeCollector(REFUSED)];
    const exporters = [a, b].map((collector) => new RetryingExporter(collector, warnings().logger));
    for (const exporter of exporters) exporter.export(spans, () => undefined);
    await vi.advanceTimersByTimeAsync(1_000);
    expect([gaps(a)[0], gaps(b)[0]]).toEqual([420, 580]); // 500 ms × (1 ± 20 % × random)
    await Promise.all(exporters.map((exporter) => exporter.shutdown()));
  });

  it('a retry due while a forceFlush is sending is not lost when that send fails', async () => {
    vi.useFakeTimers();
    const spans = endedSpans('s', 1);
    randomAnswers(0.5); // no jitter: 500 ms, then 1 s
    const collector = new FakeCollector(REFUSED);
    const retrying = new RetryingExporter(collector, warnings().logger, { initialBackoffMs: 500 });
    retrying.export(spans, () => undefined); // refused: kept, a retry armed for 500 ms
    collector.answer = 'hold';
    const flushing = retrying.forceFlush(); // sends it again (held) …
    await vi.advanceTimersByTimeAsync(500); // … while the retry comes due and joins that send
    collector.release(REFUSED);
    collector.answer = REFUSED;
    await flushing;
    expect(collector.calls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1_000); // the next retry is armed all the same
    expect(collector.calls).toHaveLength(3);
    expect(retrying.buffered.spans).toBe(1);
    await retrying.shutdown();
  });
});

// google.rpc.Status { details: [Any { type_url, value: RetryInfo { retry_delay: Duration } }] }, encoded by hand.
function varint(n: number): number[] {
  const bytes: number[] = [];
  while (n >= 0x80) {
    bytes.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  bytes.push(n);
  return bytes;
}
const lengthDelimited = (field: number, bytes: number[]): number[] => [...varint(field * 8 + 2), ...varint(bytes.length), ...bytes];
function statusWithRetryDelay(ms: number): Buffer {
  const duration = [...varint(1 * 8), ...varint(Math.floor(ms / 1_000)), ...varint(2 * 8), ...varint((ms % 1_000) * 1e6)];
  const retryInfo = lengthDelimited(1, duration);
  const any = [...lengthDelimited(1, [...Buffer.from('type.googleapis.com/google.rpc.RetryInfo')]), ...lengthDelimited(2, retryInfo)];
  return Buffer.from([...varint(1 * 8), ...varint(grpc.status.RESOURCE_EXHAUSTED), ...lengthDelimited(3, any)]);
}

/** What the OTLP/gRPC exporter answers for a collector that says RESOURCE_EXHAUSTED, retry in `ms`. */
function resourceExhausted(ms: number): ExportResult {
  const metadata = new grpc.Metadata();
  metadata.set('grpc-status-details-bin', statusWithRetryDelay(ms));
  const error = Object.assign(new Error('8 RESOURCE_EXHAUSTED: slow down'), {
    code: grpc.status.RESOURCE_EXHAUSTED,
    details: 'slow down',
    metadata,
  });
  return { code: ExportResultCode.FAILED, error };
}

describe('the delay a collector asks for (gRPC RetryInfo)', () => {
  it('is waited, at most maxBackoffMs', async () => {
    vi.useFakeTimers();
    const spans = endedSpans('s', 1);
    randomAnswers(0.5);
    const collector = new FakeCollector(resourceExhausted(7_250));
    const retrying = new RetryingExporter(collector, warnings().logger, { initialBackoffMs: 500 });
    retrying.export(spans, () => undefined);
    expect(retrying.dropped).toBe(0); // RESOURCE_EXHAUSTED with a RetryInfo is worth another try
    await vi.advanceTimersByTimeAsync(7_249);
    expect(collector.calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(collector.calls).toHaveLength(2);
    collector.answer = resourceExhausted(120_000);
    await vi.advanceTimersByTimeAsync(7_250);
    expect(gaps(collector)).toEqual([7_250, 7_250]);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(gaps(collector)).toEqual([7_250, 7_250, 30_000]); // 2 min asked: the 30 s cap
    await retrying.shutdown();
  });

  it('never makes a retry sooner than the backoff', async () => {
    vi.useFakeTimers();
    const spans = endedSpans('s', 1);
    randomAnswers(0.5);
    const collector = new FakeCollector(resourceExhausted(0));
    const retrying = new RetryingExporter(collector, warnings().logger, { initialBackoffMs: 500 });
    retrying.export(spans, () => undefined);
    await vi.advanceTimersByTimeAsync(1_500);
    expect(gaps(collector)).toEqual([500, 1_000]);
    await retrying.shutdown();
  });
});

describe('OTLP/gRPC, on loopback', () => {
  const TRACE_EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
  const raw = { serialize: (bytes: Buffer) => bytes, deserialize: (bytes: Buffer) => bytes };

  async function collector(answer: (callback: grpc.sendUnaryData<Buffer>) => void): Promise<{ url: string; close: () => void }> {
    const server = new grpc.Server();
    server.addService(
      {
        Export: {
          path: TRACE_EXPORT,
          requestStream: false,
          responseStream: false,
          requestSerialize: raw.serialize,
          requestDeserialize: raw.deserialize,
          responseSerialize: raw.serialize,
          responseDeserialize: raw.deserialize,
        },
      },
      {
        Export: (_call: unknown, callback: grpc.sendUnaryData<Buffer>) => {
          answer(callback);
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => {
        if (error) reject(error);
        else resolve(bound);
      });
    });
    return {
      url: `http://127.0.0.1:${String(port)}`,
      close: () => {
        server.forceShutdown();
      },
    };
  }

  it('a collector not listening (UNAVAILABLE): the batch is kept for a retry, not dropped as refused for good', async () => {
    const port = await freePort();
    const retrying = new RetryingExporter(new OtlpGrpcTraceExporter({ url: `http://127.0.0.1:${String(port)}` }), warnings().logger);
    try {
      await exportThrough(retrying, endedSpans('s', 2));
      expect(retrying.dropped).toBe(0);
      expect(retrying.buffered.spans).toBe(2);
    } finally {
      await retrying.shutdown();
    }
  });

  it('RESOURCE_EXHAUSTED with a RetryInfo: kept, and the delay read from the real exporter’s result', async () => {
    const server = await collector((callback) => {
      const metadata = new grpc.Metadata();
      metadata.set('grpc-status-details-bin', statusWithRetryDelay(7_000));
      callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: 'slow down', metadata });
    });
    const otlp = new OtlpGrpcTraceExporter({ url: server.url });
    const retrying = new RetryingExporter(otlp, warnings().logger);
    try {
      expect(retryAdvice(await exportThrough(otlp, endedSpans('direct', 1)))).toEqual({ retryable: true, afterMs: 7_000 });
      await exportThrough(retrying, endedSpans('s', 2));
      expect(retrying.dropped).toBe(0);
      expect(retrying.buffered.spans).toBe(2);
    } finally {
      await retrying.shutdown();
      server.close();
    }
  });

  it('RESOURCE_EXHAUSTED without one, or INVALID_ARGUMENT: refused for good', async () => {
    for (const code of [grpc.status.RESOURCE_EXHAUSTED, grpc.status.INVALID_ARGUMENT]) {
      const server = await collector((callback) => {
        callback({ code, details: 'no' });
      });
      const retrying = new RetryingExporter(new OtlpGrpcTraceExporter({ url: server.url }), warnings().logger);
      try {
        await exportThrough(retrying, endedSpans('s', 2));
        expect(retrying.dropped).toBe(2);
        expect(retrying.buffered.spans).toBe(0);
      } finally {
        await retrying.shutdown();
        server.close();
      }
    }
  });
});

describe("a collector's status details are read without trusting them", () => {
  it('malformed or random grpc-status-details-bin: never throws; a delay, when read, is finite and at least 0', () => {
    const unavailable = (details: Buffer): ExportResult => {
      const metadata = new grpc.Metadata();
      metadata.add('grpc-status-details-bin', details);
      return { code: ExportResultCode.FAILED, error: Object.assign(new Error('unavailable'), { code: 14, metadata }) };
    };
    const shapes = [
      Buffer.alloc(0),
      Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), // a varint past 10 bytes
      Buffer.from([0x1a, 0xff, 0xff, 0xff, 0x0f]), // a length far past the end
      Buffer.from([0x1b, 0x00]), // a group wire type
      Buffer.from([0x1a, 0x02, 0x0a]), // a detail cut short
    ];
    let seed = 7;
    const random = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 2_000; i++)
      shapes.push(Buffer.from(Array.from({ length: Math.floor(random() * 64) }, () => Math.floor(random() * 256))));
    for (const details of shapes) {
      const advice = retryAdvice(unavailable(details));
      expect(advice.retryable).toBe(true); // UNAVAILABLE is retried whatever its details say
      if (advice.afterMs !== undefined) {
        expect(Number.isFinite(advice.afterMs)).toBe(true);
        expect(advice.afterMs).toBeGreaterThanOrEqual(0);
      }
    }
  });
});
