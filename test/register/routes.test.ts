/**
 * Server spans named by the route the framework matched (`GET /api/orders/:id`), in register mode
 * with no OpenTelemetry instrumentation for the framework (LIFELINE_AUTO_INSTRUMENTATIONS=off): for
 * Fastify 5 (its diagnostics channel) and Express 5 (its route dispatch), on answered requests and
 * on the snapshots of requests still stuck. Read back from a real OTLP exporter.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { otlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { startService, type ChildService } from '../support/service.js';

const SERVER = 2;
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
const stops: (() => void)[] = [];

beforeAll(async () => {
  receiver = await otlpReceiver();
});
afterAll(async () => {
  for (const stop of stops) stop();
  await receiver.close();
});

function start(script: string, name: string): Promise<ChildService> {
  return startService(
    script,
    {
      OTEL_SERVICE_NAME: name,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      LIFELINE_PROBE_PORT: '0',
      LIFELINE_HEALTH_INTERVAL_MS: '1000',
      LIFELINE_STUCK_AFTER_MS: '400',
      LIFELINE_AUTO_INSTRUMENTATIONS: 'off',
      LIFELINE_WATCHDOG_THRESHOLD_MS: '10000',
    },
    ['--import', 'otel-lifeline/register'],
  );
}

const traceparent = (traceId: string): string => `00-${traceId}-${randomBytes(8).toString('hex')}-01`;

/** The server span of `traceId` that ended (not a snapshot), once exported. */
async function endedServerSpan(traceId: string): Promise<ReceivedSpan | undefined> {
  const ended = (all: ReceivedSpan[]) =>
    all.filter((s) => s.traceId === traceId && s.kind === SERVER && s.attributes['lifeline.in_flight'] === undefined);
  return ended(await receiver.waitFor((all) => ended(all).length > 0))[0];
}

/** The snapshot of the stuck server span of a request to `path`, once exported. */
async function stuckServerSnapshot(url: string, path: string): Promise<ReceivedSpan | undefined> {
  const traceId = randomBytes(16).toString('hex');
  const controller = new AbortController();
  stops.push(() => {
    controller.abort();
  });
  void fetch(`${url}${path}`, { headers: { traceparent: traceparent(traceId) }, signal: controller.signal }).catch(() => undefined);
  const snapshots = (all: ReceivedSpan[]) =>
    all.filter((s) => s.traceId === traceId && s.kind === SERVER && s.attributes['lifeline.in_flight'] === true);
  return snapshots(await receiver.waitFor((all) => snapshots(all).length > 0))[0];
}

describe('Fastify 5, without OpenTelemetry’s Fastify instrumentation', () => {
  let app: ChildService;
  beforeAll(async () => {
    app = await start('test/fixtures/stuck-fastify.mjs', 'routes-fastify');
  }, 60_000);
  afterAll(async () => {
    for (const stop of stops.splice(0)) stop(); // the stuck requests' callers leave first
    await app.stop();
  });

  it('an answered request: the server span is named by the route, with its prefix, and carries http.route', async () => {
    const traceId = randomBytes(16).toString('hex');
    const response = await fetch(`${app.url}/api/items/7`, { headers: { traceparent: traceparent(traceId) } });
    expect(await response.json()).toEqual({ id: '7' });
    const server = await endedServerSpan(traceId);
    expect(server?.name).toBe('GET /api/items/:id');
    expect(server?.attributes['http.route']).toBe('/api/items/:id');
  });

  it('a request stuck in its handler: the snapshot says GET /api/orders/:id', async () => {
    const snapshot = await stuckServerSnapshot(app.url, '/api/orders/42');
    expect(snapshot?.name).toMatch(/^GET \/api\/orders\/:id \(in flight, \d+ s, no deadline\)$/);
    expect(snapshot?.attributes['http.route']).toBe('/api/orders/:id');
  });
});

describe('Express 5, without OpenTelemetry’s Express instrumentation', () => {
  let app: ChildService;
  beforeAll(async () => {
    app = await start('test/fixtures/stuck-express.mjs', 'routes-express');
  }, 60_000);
  afterAll(async () => {
    for (const stop of stops.splice(0)) stop(); // the stuck requests' callers leave first
    await app.stop();
  });

  it('an answered request: the server span is named by the route and carries http.route', async () => {
    const traceId = randomBytes(16).toString('hex');
    const response = await fetch(`${app.url}/slow?ms=1`, { headers: { traceparent: traceparent(traceId) } });
    expect(await response.text()).toBe('late');
    const server = await endedServerSpan(traceId);
    expect(server?.name).toBe('GET /slow');
    expect(server?.attributes['http.route']).toBe('/slow');
  });

  it('a request stuck in a mounted router: the snapshot says GET /orders/:id', async () => {
    const snapshot = await stuckServerSnapshot(app.url, '/orders/42');
    expect(snapshot?.name).toMatch(/^GET \/orders\/:id \(in flight, \d+ s, no deadline\)$/);
    expect(snapshot?.attributes['http.route']).toBe('/orders/:id');
  });
});

describe('Express 5, a router mounted under a path with a parameter', () => {
  let app: ChildService;
  beforeAll(async () => {
    app = await start('test/fixtures/express-param-mount.mjs', 'routes-express-params');
  }, 60_000);
  afterAll(async () => {
    await app.stop();
  });

  it('is not named by what matched (one name per user): the mounted route stays unnamed, the others keep their route', async () => {
    const mounted = randomBytes(16).toString('hex');
    const response = await fetch(`${app.url}/users/4242/posts/7`, { headers: { traceparent: traceparent(mounted) } });
    expect(await response.json()).toEqual({ user: '4242', post: '7' });
    const server = await endedServerSpan(mounted);
    expect(server?.name).toBe('GET');
    expect(server?.attributes['http.route']).toBeUndefined();

    const root = randomBytes(16).toString('hex');
    expect(await (await fetch(`${app.url}/health`, { headers: { traceparent: traceparent(root) } })).text()).toBe('ok');
    expect((await endedServerSpan(root))?.name).toBe('GET /health');
  });
});
