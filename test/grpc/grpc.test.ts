import type * as Grpc from '@grpc/grpc-js';
import { createRequire } from 'node:module';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentDeadline, isDeadlineExceeded, withTimeout } from '../../src/index.js';
import type { Lifeline } from '../../src/sdk/index.js';
import { lateness } from '../support/clients.js';
import { CUT_BOUND_MS } from '../support/cut.js';
import { stallsHandshake } from '../support/servers.js';
import { endedClientSpan, startInMemoryLifeline } from '../support/tracing.js';
import { serverStream, startGrpcService, unary, type GrpcService } from '../support/grpc.js';

/**
 * @grpc/grpc-js under startLifeline, against a real gRPC server on loopback: client calls carry
 * the context's deadline as their gRPC deadline, server handlers run under the caller's.
 */
const exporter = new InMemorySpanExporter();
/** grpc-js keeps deadlines as wall-clock ms and sends `grpc-timeout` in whole units: comparisons of two clocks, not scheduling. */
const WALL_CLOCK_MS = 5;
let lifeline: Lifeline;
let service: GrpcService;
beforeAll(async () => {
  lifeline = await startInMemoryLifeline(exporter, {
    propagation: { maxInboundMs: 10_000 },
  });
  // Required after the SDK started, as a CommonJS service under `--import otel-lifeline/register` does.
  const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;
  service = await startGrpcService(grpc, currentDeadline);
  await unary(service.client, 'Hello', {}); // connect and warm up
});
afterAll(async () => {
  await service.close();
  await lifeline.shutdown();
});

/** The gRPC client span of `method`, once it has ended. */
const grpcClientSpan = (method: string) =>
  endedClientSpan(
    () => exporter.getFinishedSpans(),
    (s) => s.attributes['rpc.system'] === 'grpc' && s.attributes['rpc.method'] === method,
  );

describe('gRPC clients (grpc-js) under a deadline', () => {
  it.each([
    ['unary, no answer', 'Stall', () => unary(service.client, 'Stall', {})],
    ['server streaming, stalled after the first message', 'Trickle', () => serverStream(service.client, 'Trickle', {})],
  ])('%s: DEADLINE_EXCEEDED at the deadline, recognised, on the client span', async (_case, method, call) => {
    exporter.reset();
    const { error, lateMs } = await lateness(300, call);
    expect((error as { code?: number }).code).toBe(4); // DEADLINE_EXCEEDED, the standard way
    expect(isDeadlineExceeded(error)).toBe(true);
    // grpc-js times a deadline on the wall clock in whole ms; the server stalls forever.
    expect(lateMs).toBeGreaterThanOrEqual(-WALL_CLOCK_MS);
    expect(lateMs).toBeLessThan(CUT_BOUND_MS);
    const span = await grpcClientSpan(method);
    expect(span?.attributes['lifeline.deadline.source']).toBe('scope');
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(span?.attributes['error.type']).toBe('timeout');
  });

  it('a TLS handshake that never completes: DEADLINE_EXCEEDED at the deadline', async () => {
    const silent = await stallsHandshake();
    const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;
    const Client = grpc.makeGenericClientConstructor(
      {
        Hello: {
          path: '/lifeline.Test/Hello',
          requestStream: false,
          responseStream: false,
          requestSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
          requestDeserialize: (b: Buffer): unknown => JSON.parse(String(b)),
          responseSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
          responseDeserialize: (b: Buffer): unknown => JSON.parse(String(b)),
        },
      },
      'Test',
    );
    const client = new Client(`127.0.0.1:${String(silent.port)}`, grpc.credentials.createSsl()) as GrpcService['client'];
    try {
      const { error, lateMs } = await lateness(300, () => unary(client, 'Hello', {}));
      expect((error as { code?: number }).code).toBe(4);
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(lateMs).toBeGreaterThanOrEqual(-WALL_CLOCK_MS);
      expect(lateMs).toBeLessThan(CUT_BOUND_MS);
    } finally {
      client.close();
      await silent.close();
    }
  });

  it("keeps the caller's own earlier gRPC deadline", async () => {
    let scopeCut = false;
    // Halfway to lifeline's 5 s scope: a call its 200 ms deadline did not end would still be running.
    const scope = setTimeout(() => (scopeCut = true), 2_500);
    const error = await withTimeout(5_000, () => unary(service.client, 'Stall', {}, { deadline: Date.now() + 200 })).catch(
      (e: unknown) => e,
    );
    clearTimeout(scope);
    expect(isDeadlineExceeded(error)).toBe(true);
    expect(scopeCut).toBe(false); // the caller's 200 ms deadline ended it
  });

  it('sends grpc-timeout on the wire: the server handler runs under it, as its inbound deadline', async () => {
    const before = Date.now();
    const seen = (await withTimeout(2_000, () => unary(service.client, 'Deadline', {}))) as { at?: number; source: string | null };
    expect(seen.source).toBe('inbound');
    expect(seen.at).toBeGreaterThanOrEqual(before + 2_000 - WALL_CLOCK_MS); // the budget, less what was spent before sending
    expect(seen.at).toBeLessThanOrEqual(Date.now() + 2_000 + WALL_CLOCK_MS);
  });
});

describe('gRPC servers', () => {
  it("run a handler under the caller's grpc-timeout (no lifeline on the caller's side)", async () => {
    // An explicit gRPC deadline and no lifeline context: only grpc-timeout carries it.
    const deadline = Date.now() + 3_000;
    const seen = (await unary(service.client, 'Deadline', {}, { deadline })) as { at?: number; source: string | null };
    expect(seen.source).toBe('inbound');
    // grpc-timeout carries what was left when sent: the server's deadline is the caller's, plus transit.
    expect(seen.at).toBeGreaterThanOrEqual(deadline - WALL_CLOCK_MS);
    expect(seen.at).toBeLessThanOrEqual(Date.now() + 3_000 + WALL_CLOCK_MS);
  });

  it('clamp an inbound budget to maxInboundMs, as for HTTP', async () => {
    const seen = (await unary(service.client, 'Deadline', {}, { deadline: Date.now() + 600_000 })) as {
      at?: number;
      source: string | null;
    };
    expect(seen.source).toBe('inbound');
    expect((seen.at ?? 0) - Date.now()).toBeLessThanOrEqual(10_000);
    expect((seen.at ?? 0) - Date.now()).toBeGreaterThan(9_000);
  });

  it("run the app's handler with the app's own object as `this` (its #private fields work)", async () => {
    const grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;
    const json = {
      requestSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
      requestDeserialize: (b: Buffer): unknown => JSON.parse(String(b)),
      responseSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
      responseDeserialize: (b: Buffer): unknown => JSON.parse(String(b)),
    };
    const definition = {
      Count: { path: '/lifeline.Test/Count', requestStream: false, responseStream: false, ...json },
    } as unknown as Grpc.ServiceDefinition;
    class Counter {
      #count = 0;
      Count(_call: unknown, callback: Grpc.sendUnaryData<unknown>): void {
        this.#count++;
        callback(null, { count: this.#count });
      }
    }
    const server = new grpc.Server();
    server.addService(definition, new Counter() as unknown as Grpc.UntypedServiceImplementation);
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => {
        if (error) reject(error);
        else resolve(bound);
      });
    });
    const Client = grpc.makeGenericClientConstructor(definition, 'Test');
    const client = new Client(`127.0.0.1:${String(port)}`, grpc.credentials.createInsecure()) as GrpcService['client'];
    try {
      expect(await unary(client, 'Count', {}, { deadline: Date.now() + 5_000 })).toEqual({ count: 1 });
      expect(await unary(client, 'Count', {}, { deadline: Date.now() + 5_000 })).toEqual({ count: 2 });
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it('leave a call without a deadline unbounded', async () => {
    expect(await unary(service.client, 'Deadline', {})).toEqual({ source: null });
  });
});
