import { ExportResultCode } from '@opentelemetry/core';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { flushAtExit, RetryingExporter } from '../../src/export/index.js';
import * as grpc from '@grpc/grpc-js';
import { OtlpGrpcTraceExporter } from '../../src/export/otlp-grpc-exporter.js';
import { OtlpHttpTraceExporter, retryAfterMs } from '../../src/export/otlp-http-exporter.js';
import { retryAdvice } from '../../src/export/retry-advice.js';
import { freePort } from '../support/node.js';
import { endedSpans, exportThrough, FakeCollector, REFUSED, warnings } from './support.js';

/** A collector on loopback answering each export with `answer`; records what it received. */
async function collector(answer: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void) {
  const bodies: { headers: IncomingMessage['headers']; body: Buffer }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      bodies.push({ headers: req.headers, body });
      answer(req, res, body);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}/v1/traces`,
    bodies,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

describe("lifeline's OTLP/HTTP exporter: one attempt per export", () => {
  it('delivers protobuf, gzipped when asked, with the configured headers', async () => {
    const server = await collector((_req, res) => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
    closers.push(server.close);
    const exporter = new OtlpHttpTraceExporter('protobuf', {
      url: server.url,
      compression: 'gzip' as never,
      headers: { 'x-tenant': 't1' },
    });
    const result = await exportThrough(exporter, endedSpans('s', 3));
    expect(result.code).toBe(ExportResultCode.SUCCESS);
    expect(server.bodies).toHaveLength(1);
    const [{ headers, body }] = server.bodies as [{ headers: IncomingMessage['headers']; body: Buffer }];
    expect(headers['content-type']).toBe('application/x-protobuf');
    expect(headers['content-encoding']).toBe('gzip');
    expect(headers['x-tenant']).toBe('t1');
    expect(headers['user-agent']).toContain('otel-lifeline');
    expect(gunzipSync(body).toString('latin1')).toContain('s-2'); // the span names are in the message
    await exporter.shutdown();
  });

  it('http/json sends JSON', async () => {
    const server = await collector((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    closers.push(server.close);
    const exporter = new OtlpHttpTraceExporter('json', { url: server.url });
    expect((await exportThrough(exporter, endedSpans('j', 1))).code).toBe(ExportResultCode.SUCCESS);
    expect(JSON.parse(server.bodies[0]?.body.toString('utf8') ?? '')).toHaveProperty('resourceSpans');
  });

  it('a refused connection fails at once, retryable, with no retry of its own', async () => {
    const port = await freePort();
    const exporter = new OtlpHttpTraceExporter('protobuf', { url: `http://127.0.0.1:${String(port)}/v1/traces` });
    const started = performance.now();
    const result = await exportThrough(exporter, endedSpans('s', 1));
    expect(performance.now() - started).toBeLessThan(2_000); // OpenTelemetry's own retry for up to 10 s
    expect(result.code).toBe(ExportResultCode.FAILED);
    expect(retryAdvice(result)).toEqual({ retryable: true });
  });

  it("503 with Retry-After: retryable once, and the collector's delay is handed to the retrier; 400: refused for good", async () => {
    let status = 503;
    const server = await collector((_req, res) => res.writeHead(status, { 'retry-after': '7' }).end('busy'));
    closers.push(server.close);
    const exporter = new OtlpHttpTraceExporter('protobuf', { url: server.url });
    expect(retryAdvice(await exportThrough(exporter, endedSpans('s', 1)))).toEqual({ retryable: true, afterMs: 7_000 });
    expect(server.bodies).toHaveLength(1); // one attempt
    status = 400;
    expect(retryAdvice(await exportThrough(exporter, endedSpans('s', 1)))).toEqual({ retryable: false });
  });

  it('abortSends ends an export the collector never answers, as a retryable failure', async () => {
    const server = await collector(() => undefined); // reads the export, never answers
    closers.push(server.close);
    const exporter = new OtlpHttpTraceExporter('protobuf', { url: server.url, timeoutMillis: 60_000 });
    const pending = exportThrough(exporter, endedSpans('s', 1));
    while (server.bodies.length === 0) await new Promise((resolve) => setImmediate(resolve));
    exporter.abortSends();
    const result = await pending;
    expect(result.code).toBe(ExportResultCode.FAILED);
    expect(retryAdvice(result).retryable).toBe(true);
  });

  it('Retry-After as seconds or an HTTP date; nonsense is ignored', () => {
    expect(retryAfterMs('3')).toBe(3_000);
    expect(retryAfterMs(new Date(Date.now() + 10_000).toUTCString())).toBeGreaterThan(8_000);
    expect(retryAfterMs('soon')).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });
});

describe("lifeline's OTLP/gRPC exporter", () => {
  const raw = (bytes: Buffer): Buffer => bytes;

  /** A collector on loopback; `answer` gets each export's callback (never calling it: no answer). */
  async function grpcCollector(answer: (callback: grpc.sendUnaryData<Buffer>) => void) {
    const requests: { request: Buffer; userAgent: string }[] = [];
    const server = new grpc.Server();
    server.addService(
      {
        Export: {
          path: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
          requestStream: false,
          responseStream: false,
          requestSerialize: raw,
          requestDeserialize: raw,
          responseSerialize: raw,
          responseDeserialize: raw,
        },
      },
      {
        Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
          requests.push({ request: call.request, userAgent: String(call.metadata.get('user-agent')[0]) });
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
    closers.push(() => {
      server.forceShutdown();
    });
    return { url: `http://127.0.0.1:${String(port)}`, requests };
  }

  it('delivers the spans, once', async () => {
    const server = await grpcCollector((callback) => {
      callback(null, Buffer.alloc(0));
    });
    const exporter = new OtlpGrpcTraceExporter({ url: server.url });
    expect((await exportThrough(exporter, endedSpans('g', 2))).code).toBe(ExportResultCode.SUCCESS);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.request.toString('latin1')).toContain('g-1');
    expect(server.requests[0]?.userAgent).toContain('otel-lifeline');
    await exporter.shutdown();
  });

  it('UNAVAILABLE (nothing listening) fails at once, retryable', async () => {
    const port = await freePort();
    const exporter = new OtlpGrpcTraceExporter({ url: `http://127.0.0.1:${String(port)}` });
    const result = await exportThrough(exporter, endedSpans('g', 1));
    expect(result.code).toBe(ExportResultCode.FAILED);
    expect(retryAdvice(result)).toEqual({ retryable: true });
    await exporter.shutdown();
  });

  it('abortSends cancels a call the collector never answers: CANCELLED, retryable', async () => {
    const server = await grpcCollector(() => undefined);
    const exporter = new OtlpGrpcTraceExporter({ url: server.url, timeoutMillis: 60_000 });
    const pending = exportThrough(exporter, endedSpans('g', 1));
    while (server.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    exporter.abortSends();
    const result = await pending;
    expect((result.error as { code?: number } | undefined)?.code).toBe(grpc.status.CANCELLED);
    expect(retryAdvice(result).retryable).toBe(true);
    await exporter.shutdown();
  });
});

describe('the flush at the process’s natural end (flushAtExit)', () => {
  it('a refused collector: one attempt, the spans dropped as exit and said in one line, no retry left behind', async () => {
    const log = warnings();
    const inner = new FakeCollector(REFUSED);
    const retrying = new RetryingExporter(inner, log.logger);
    await exportThrough(retrying, endedSpans('kept', 2)); // refused during the run: kept for a retry
    expect(retrying.buffered.spans).toBe(2);
    log.lines.length = 0;
    await flushAtExit([retrying], () => exportThrough(retrying, endedSpans('last', 3)).then(() => undefined));
    // The kept batch goes first (in order), is refused; what came later joins it and is not sent.
    expect(inner.calls.map((call) => call.names[0])).toEqual(['kept-0', 'kept-0']);
    expect(retrying.dropped).toBe(5);
    expect(retrying.buffered.spans).toBe(0);
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]?.fields).toMatchObject({ dropped: 5, reasons: { exit: 5 } });
    await retrying.shutdown();
    expect(inner.calls).toHaveLength(2); // nothing was retried after the flush
  });

  it('a collector that never answers: the send is ended at the budget, later batches are not sent, all said once', async () => {
    const log = warnings();
    const inner = Object.assign(new FakeCollector('hold'), {
      aborted: 0,
      abortSends(this: FakeCollector & { aborted: number }) {
        this.aborted++;
        this.release(REFUSED);
      },
    });
    const retrying = new RetryingExporter(inner, log.logger);
    const started = performance.now();
    await flushAtExit(
      [retrying],
      async () => {
        await exportThrough(retrying, endedSpans('first', 2));
        await exportThrough(retrying, endedSpans('second', 3)); // after the budget: dropped unsent
      },
      100,
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(95);
    expect(inner.aborted).toBe(1);
    expect(inner.calls).toHaveLength(1);
    expect(retrying.dropped).toBe(5);
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]?.fields).toMatchObject({ dropped: 5, reasons: { exit: 5 } });
    await retrying.shutdown();
  });

  it('a collector that answers: everything delivered, nothing said, and normal retries resume after the flush', async () => {
    const log = warnings();
    const inner = new FakeCollector({ code: ExportResultCode.SUCCESS });
    const retrying = new RetryingExporter(inner, log.logger);
    await flushAtExit([retrying], () => exportThrough(retrying, endedSpans('s', 4)).then(() => undefined));
    expect(inner.calls).toHaveLength(1);
    expect(retrying.dropped).toBe(0);
    expect(log.lines).toHaveLength(0);
    inner.answer = REFUSED; // the process went on after all: a refusal is kept for a retry again
    await exportThrough(retrying, endedSpans('after', 1));
    expect(retrying.buffered.spans).toBe(1);
    expect(retrying.dropped).toBe(0);
    await retrying.shutdown();
  });
});
