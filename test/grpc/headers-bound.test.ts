import type * as Grpc from '@grpc/grpc-js';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentDeadline, isDeadlineExceeded, withTimeout } from '../../src/index.js';
import type { Lifeline } from '../../src/sdk/index.js';
import { serverStream, startGrpcService, unary, type GrpcService } from '../support/grpc.js';
import { endedClientSpan, startInMemoryLifeline } from '../support/tracing.js';

/**
 * The headers bound on @grpc/grpc-js clients under startLifeline, against a real gRPC server on
 * loopback: a unary call nothing bounds waits at most `headersTimeoutMs` for its response
 * metadata; streams, calls with a deadline of their own and calls under a context deadline or a
 * rule are not bounded by it. No `grpc-timeout` and no `x-request-timeout-ms` go with it.
 */
const BOUND_MS = 300;
const SLOW_MS = BOUND_MS * 3;
const exporter = new InMemorySpanExporter();
let lifeline: Lifeline;
let service: GrpcService;
/** The same service through `localhost`, which the policy rule matches. */
let ruled: GrpcService['client'];
beforeAll(async () => {
  lifeline = await startInMemoryLifeline(exporter, {
    deadlines: { headersTimeoutMs: BOUND_MS, policy: [{ match: { 'server.address': 'localhost' }, timeoutMs: 10_000 }] },
  });
  // Required after the SDK started, as a CommonJS service under `--import otel-lifeline/register` does.
  const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;
  service = await startGrpcService(grpc, currentDeadline);
  const Client = service.client.constructor as new (address: string, credentials: Grpc.ChannelCredentials) => GrpcService['client'];
  ruled = new Client(service.address.replace('127.0.0.1', 'localhost'), grpc.credentials.createInsecure());
  await unary(service.client, 'Hello', {}); // connect and warm up
});
afterAll(async () => {
  ruled.close();
  await service.close();
  await lifeline.shutdown();
});

/** The gRPC client span of `method`, once it has ended. */
const grpcClientSpan = (method: string) =>
  endedClientSpan(
    () => exporter.getFinishedSpans(),
    (s) => s.attributes['rpc.system'] === 'grpc' && s.attributes['rpc.method'] === method,
  );

describe('gRPC unary calls nothing else bounds', () => {
  it('no response: DEADLINE_EXCEEDED at the headers bound, recognised, on the client span with source headers', async () => {
    exporter.reset();
    const started = Date.now();
    const error = await unary(service.client, 'Stall', {}).catch((e: unknown) => e);
    const elapsed = Date.now() - started;
    expect((error as { code?: number }).code).toBe(4);
    expect(isDeadlineExceeded(error)).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(BOUND_MS);
    expect(elapsed).toBeLessThan(BOUND_MS + 3_000); // proves the bound, not its precision
    const span = await grpcClientSpan('Stall');
    expect(span?.attributes['lifeline.deadline.source']).toBe('headers');
    expect(span?.attributes['lifeline.deadline.missing']).toBe(true);
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(span?.attributes['error.type']).toBe('timeout');
  });

  it('an answer in time: no deadline marks, and the server runs without a deadline (no grpc-timeout sent)', async () => {
    exporter.reset();
    expect(await unary(service.client, 'Hello', {})).toEqual({ hello: 'world' });
    const span = await grpcClientSpan('Hello');
    expect(span?.attributes['lifeline.deadline.source']).toBe('headers');
    expect(span?.attributes['lifeline.deadline.exceeded']).toBeUndefined();
    expect(await unary(service.client, 'Deadline', {})).toEqual({ source: null });
    const metadata = (await unary(service.client, 'Metadata', {})) as Record<string, unknown>;
    expect(metadata['x-request-timeout-ms']).toBeUndefined();
  });

  it('a deadline of its own, however long, replaces the bound', async () => {
    expect(await unary(service.client, 'Slow', { ms: SLOW_MS }, { deadline: Date.now() + 10_000 })).toEqual({ slow: true });
  });

  it('a context deadline replaces the bound; grpc-timeout carries it, x-request-timeout-ms is not added', async () => {
    expect(await withTimeout(10_000, () => unary(service.client, 'Slow', { ms: SLOW_MS }))).toEqual({ slow: true });
    const metadata = (await withTimeout(5_000, () => unary(service.client, 'Metadata', {}))) as Record<string, unknown>;
    expect(metadata['x-request-timeout-ms']).toBeUndefined();
  });

  it('a matching policy rule replaces the bound and reaches the server as grpc-timeout', async () => {
    expect(await unary(ruled, 'Slow', { ms: SLOW_MS })).toEqual({ slow: true });
    const seen = (await unary(ruled, 'Deadline', {})) as { at?: number; source: string | null };
    expect(seen.source).toBe('inbound');
    expect((seen.at ?? 0) - Date.now()).toBeGreaterThan(8_000);
  });
});

describe('gRPC streams are not bounded by it (the metadata comes with the first message)', () => {
  it('a server stream whose first message comes after the bound runs to its end', async () => {
    exporter.reset();
    expect(await serverStream(service.client, 'Later', { ms: SLOW_MS })).toEqual([{ n: 1 }]);
    const span = await grpcClientSpan('Later');
    expect(span?.attributes['lifeline.deadline.exceeded']).toBeUndefined();
  });
});
