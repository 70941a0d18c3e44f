import type * as Grpc from '@grpc/grpc-js';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentDeadline, LifelineError, type TrustInbound } from 'otel-lifeline';
import { GrpcDeadlineInstrumentation } from 'otel-lifeline/sdk';
import { unary, type GrpcService } from '../support/grpc.js';

/**
 * Inbound grpc-timeout follows the same trust rule as the HTTP header, by the call's peer: a real
 * grpc-js server (its handlers wrapped by GrpcDeadlineInstrumentation as services are added) and a
 * real grpc-js client on loopback, IPv4 and IPv6.
 */
const json = {
  requestSerialize: (value: unknown) => Buffer.from(JSON.stringify(value ?? null)),
  requestDeserialize: (bytes: Buffer): unknown => JSON.parse(bytes.toString()),
  responseSerialize: (value: unknown) => Buffer.from(JSON.stringify(value ?? null)),
  responseDeserialize: (bytes: Buffer): unknown => JSON.parse(bytes.toString()),
};
const definition = { Deadline: { path: '/lifeline.Trust/Deadline', requestStream: false, responseStream: false, ...json } };
interface Seen {
  at?: number;
  source: string | null;
  peer: string;
}

const instrumentation = new GrpcDeadlineInstrumentation();
let grpc: typeof Grpc;
const cleanups: (() => void)[] = [];

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  instrumentation.enable();
  grpc = createRequire(import.meta.url)('@grpc/grpc-js') as typeof Grpc;
});
afterAll(() => {
  for (const cleanup of cleanups) cleanup();
  instrumentation.disable();
});

/** A server added under `options`, on `host`; `undefined` when that address is not available here. */
async function serverWith(
  options: { trustInbound?: TrustInbound; minInboundMs?: number; maxInboundMs?: number },
  host = '127.0.0.1',
): Promise<GrpcService['client'] | undefined> {
  instrumentation.setConfig(options);
  const server = new grpc.Server();
  server.addService(definition, {
    Deadline: (call: Grpc.ServerUnaryCall<unknown, unknown>, callback: Grpc.sendUnaryData<unknown>) => {
      const deadline = currentDeadline();
      callback(null, {
        ...(deadline === undefined ? { source: null } : { at: deadline.at, source: deadline.source }),
        peer: call.getPeer(),
      });
    },
  });
  const address = host.includes(':') ? `[${host}]` : host;
  const port = await new Promise<number | undefined>((resolve) => {
    server.bindAsync(`${address}:0`, grpc.ServerCredentials.createInsecure(), (error, bound) => {
      resolve(error ? undefined : bound);
    });
  });
  if (port === undefined) {
    server.forceShutdown();
    return undefined;
  }
  const Client = grpc.makeGenericClientConstructor(definition, 'Trust');
  const client = new Client(`${address}:${String(port)}`, grpc.credentials.createInsecure()) as GrpcService['client'];
  cleanups.push(() => {
    client.close();
    server.forceShutdown();
  });
  return client;
}

async function callWithin(client: GrpcService['client'] | undefined, budgetMs: number): Promise<Seen> {
  if (client === undefined) throw new Error('no server');
  return (await unary(client, 'Deadline', {}, { deadline: Date.now() + budgetMs })) as Seen;
}

describe('gRPC servers: whose grpc-timeout a handler obeys', () => {
  it("default 'private': a loopback caller's deadline is the handler's", async () => {
    const before = Date.now();
    const seen = await callWithin(await serverWith({}), 5_000);
    expect(seen.source).toBe('inbound');
    expect(seen.at).toBeGreaterThan(before + 4_000);
    expect(seen.at).toBeLessThanOrEqual(Date.now() + 5_000);
  });

  it.each([
    ["a list that leaves loopback out (['10.0.0.0/8'])", ['10.0.0.0/8']],
    ["'none'", 'none'],
  ] as const)('an untrusted caller: %s -> the handler has no deadline', async (_case, trustInbound) => {
    const seen = await callWithin(await serverWith({ trustInbound }), 5_000);
    expect(seen.source).toBeNull();
    expect(seen.peer).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('minInboundMs raises a tiny budget; maxInboundMs clamps a huge one', async () => {
    const client = await serverWith({ minInboundMs: 5_000, maxInboundMs: 8_000 });
    let before = Date.now();
    const raised = await callWithin(client, 300); // grpc-js still ends the caller's own call at 300 ms
    expect(raised.source).toBe('inbound');
    expect(raised.at).toBeGreaterThanOrEqual(before + 5_000);
    expect(raised.at).toBeLessThanOrEqual(Date.now() + 5_000);
    before = Date.now();
    const clamped = await callWithin(client, 600_000);
    expect(clamped.at).toBeGreaterThanOrEqual(before + 8_000);
    expect(clamped.at).toBeLessThanOrEqual(Date.now() + 8_000);
  });

  it('IPv6 loopback ::1 (peer "::1:port"): private by default; an IPv4 list leaves it out; a v6 list names it', async (test) => {
    const trusted = await serverWith({}, '::1');
    if (trusted === undefined) test.skip('no IPv6 loopback here');
    const seen = await callWithin(trusted, 5_000);
    expect(seen.peer).toMatch(/^(\[::1\]|::1):\d+$/);
    expect(seen.source).toBe('inbound');
    expect((await callWithin(await serverWith({ trustInbound: ['127.0.0.0/8'] }, '::1'), 5_000)).source).toBeNull();
    expect((await callWithin(await serverWith({ trustInbound: ['::1'] }, '::1'), 5_000)).source).toBe('inbound');
  });

  it('a malformed CIDR is rejected before anything is patched, naming the option', () => {
    expect(() => new GrpcDeadlineInstrumentation({ trustInbound: ['fd00::/129'], enabled: false })).toThrow(LifelineError);
    expect(() => new GrpcDeadlineInstrumentation({ trustInbound: ['10.0.0.0/8', '300.0.0.1'], enabled: false })).toThrow(
      /invalid trustInbound\[1\]: "300.0.0.1"/,
    );
    expect(() => new GrpcDeadlineInstrumentation({ minInboundMs: 10, maxInboundMs: 5, enabled: false })).toThrow(/invalid minInboundMs/);
  });
});
