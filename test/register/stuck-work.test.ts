import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { otlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { ROOT } from '../support/node.js';
import { startService, type ChildService } from '../support/service.js';

/** The 1-based line of `file` that holds `text`. */
function lineOf(file: string, text: string): number {
  return (
    readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .findIndex((line) => line.includes(text)) + 1
  );
}

/**
 * Issue 28: a service that registered nothing (register mode, no lifeline code) shows its stuck
 * requests while they are stuck, read back from a real OTLP exporter: no component, so no verdict
 * is ever taken, and a stuck request's own span never ends.
 */
const STATUS_ERROR = 2;
const SERVER = 2;
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
let app: ChildService;
/** A TCP upstream that accepts and never answers: nothing in lifeline bounds a raw socket. */
let silent: Server;
const sockets: Socket[] = [];

beforeAll(async () => {
  receiver = await otlpReceiver();
  silent = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  app = await startService(
    'test/fixtures/stuck-service.mjs',
    {
      OTEL_SERVICE_NAME: 'stuck-service',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      LIFELINE_PROBE_PORT: '0',
      LIFELINE_HEALTH_INTERVAL_MS: '1000',
      LIFELINE_STUCK_AFTER_MS: '400',
      // Start-up (module loading) may block the loop for longer than the watchdog's default threshold: not this test's subject.
      LIFELINE_WATCHDOG_THRESHOLD_MS: '10000',
    },
    ['--import', 'otel-lifeline/register'],
  );
}, 60_000);
afterAll(async () => {
  await app.stop();
  for (const socket of sockets) socket.destroy();
  silent.close();
  await receiver.close();
});

/** Starts a request that will not be answered in the test's time; its trace ID, from the traceparent sent. */
function stuckRequest(path: string, headers: Record<string, string> = {}, sampled = true): string {
  const traceId = randomBytes(16).toString('hex');
  const controller = new AbortController();
  void fetch(`${app.url}${path}`, {
    headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-${sampled ? '01' : '00'}`, ...headers },
    signal: controller.signal,
  }).catch(() => undefined);
  stops.push(() => {
    controller.abort();
  });
  return traceId;
}
const stops: (() => void)[] = [];
afterAll(() => {
  for (const stop of stops) stop();
});

const snapshotsIn = (traceId: string) => (spans: ReceivedSpan[]) =>
  spans.filter((s) => s.traceId === traceId && s.attributes['lifeline.in_flight'] === true);

describe('a zero-code service: stuck requests exported while stuck', () => {
  it('a handler awaiting a promise that never settles: a server-span snapshot in its own trace, an error, how long so far', async () => {
    const traceId = stuckRequest('/never');
    const spans = snapshotsIn(traceId)(await receiver.waitFor((all) => snapshotsIn(traceId)(all).length > 0));
    const [snapshot] = spans;
    expect(snapshot?.kind).toBe(SERVER);
    expect(snapshot?.name).toMatch(/^GET .*\(in flight, \d+ s, no deadline\)$/);
    expect(snapshot?.statusCode).toBe(STATUS_ERROR);
    expect(snapshot?.statusMessage).toMatch(/^in flight \d+\.\d s, no deadline/);
    expect(snapshot?.parentSpanId).toBe(''); // a root: no "invalid parent" in Jaeger
    expect(snapshot?.attributes['lifeline.in_flight.age_ms']).toBeGreaterThanOrEqual(400);
    expect(snapshot?.attributes['http.request.method']).toBe('GET');
    // Where its handler is defined is looked up only when the process ends (a pause a running service must not take).
    expect(snapshot?.attributes['code.file.path']).toBeUndefined();
  });

  it('a request whose caller did not sample its trace: the stuck snapshot is exported all the same (evidence survives head sampling)', async () => {
    const traceId = stuckRequest('/never', {}, false);
    const [snapshot] = snapshotsIn(traceId)(await receiver.waitFor((all) => snapshotsIn(traceId)(all).length > 0));
    expect(snapshot?.name).toMatch(/\(in flight, \d+ s, no deadline\)$/);
  });

  it('a handler stuck on an upstream nothing bounds, under an inbound deadline: exported as past its deadline', async () => {
    const port = (silent.address() as { port: number }).port;
    const traceId = stuckRequest(`/upstream?port=${String(port)}`, { 'x-request-timeout-ms': '200' });
    const spans = snapshotsIn(traceId)(await receiver.waitFor((all) => snapshotsIn(traceId)(all).length > 0));
    const server = spans.find((s) => s.kind === SERVER);
    expect(server?.name).toMatch(/\(in flight(, \d+ s)? past deadline\)$|\(in flight, past deadline\)$/);
    expect(server?.attributes['lifeline.deadline.source']).toBe('inbound');
    expect(server?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(server?.statusCode).toBe(STATUS_ERROR);
  });

  it('a handler that overruns its deadline and then answers: its own span is marked exceeded, by how much; not an error', async () => {
    const traceId = randomBytes(16).toString('hex');
    const response = await fetch(`${app.url}/overrun?ms=300`, {
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, 'x-request-timeout-ms': '100' },
    });
    expect(await response.text()).toBe('late');
    const [server] = (
      await receiver.waitFor((all) =>
        all.some((s) => s.traceId === traceId && s.kind === SERVER && s.attributes['lifeline.in_flight'] === undefined),
      )
    ).filter((s) => s.traceId === traceId && s.kind === SERVER && s.attributes['lifeline.in_flight'] === undefined);
    expect(server?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(server?.attributes['lifeline.deadline.overdue_ms']).toBeGreaterThanOrEqual(150);
    expect(server?.statusCode).not.toBe(STATUS_ERROR);
  });
});

describe('a zero-code Express service: stuck requests exported while stuck', () => {
  let express: ChildService;
  beforeAll(async () => {
    express = await zeroCode(
      'stuck-express',
      {
        OTEL_BSP_SCHEDULE_DELAY: '50',
        LIFELINE_HEALTH_INTERVAL_MS: '1000',
        LIFELINE_STUCK_AFTER_MS: '400',
        // As an Express service is traced: with OpenTelemetry's instrumentations for it.
        LIFELINE_AUTO_INSTRUMENTATIONS: 'on',
        OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http,express,router',
      },
      'test/fixtures/stuck-express.mjs',
    );
  }, 60_000);
  afterAll(async () => {
    await express.stop();
  });

  it("a route handler awaiting forever: named by its route in its own trace, its handler's name and place, the route's spans below it", async () => {
    const traceId = randomBytes(16).toString('hex');
    const controller = new AbortController();
    stops.push(() => {
      controller.abort();
    });
    void fetch(`${express.url}/orders/42`, {
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      signal: controller.signal,
    }).catch(() => undefined);
    const spans = snapshotsIn(traceId)(await receiver.waitFor((all) => snapshotsIn(traceId)(all).some((s) => s.kind === SERVER)));
    const server = spans.find((s) => s.kind === SERVER);
    expect(server?.name).toMatch(/^GET \/orders\/:id \(in flight, \d+ s, no deadline\)$/);
    expect(server?.parentSpanId).toBe('');
    expect(server?.statusCode).toBe(STATUS_ERROR);
    expect(server?.attributes['http.route']).toBe('/orders/:id');
    expect(server?.attributes['code.function.name']).toBe('getOrder');
    // Express's own spans for the route, under the request's snapshot: the handler still in flight.
    expect(spans.some((s) => s.name.startsWith('request handler - /orders/:id (in flight'))).toBe(true);
  });

  it('a route that overruns its deadline and then answers: its server span is marked exceeded, by how much', async () => {
    const traceId = randomBytes(16).toString('hex');
    const response = await fetch(`${express.url}/slow?ms=300`, {
      headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01`, 'x-request-timeout-ms': '100' },
    });
    expect(await response.text()).toBe('late');
    const ended = (all: ReceivedSpan[]) =>
      all.filter((s) => s.traceId === traceId && s.kind === SERVER && s.attributes['lifeline.in_flight'] === undefined);
    const [server] = ended(await receiver.waitFor((all) => ended(all).length > 0));
    expect(server?.name).toBe('GET /slow');
    expect(server?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(server?.attributes['lifeline.deadline.overdue_ms']).toBeGreaterThanOrEqual(150);
  });
});

/** Another zero-code service of the fixture's, to be ended by the test; exporting to the receiver. */
function zeroCode(name: string, env: Record<string, string> = {}, script = 'test/fixtures/stuck-service.mjs'): Promise<ChildService> {
  return startService(
    script,
    {
      OTEL_SERVICE_NAME: name,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      LIFELINE_PROBE_PORT: '0',
      // Not stuck by the time it ends: what the end exports is everything in flight.
      LIFELINE_STUCK_AFTER_MS: '600000',
      LIFELINE_WATCHDOG_THRESHOLD_MS: '10000',
      ...env,
    },
    ['--import', 'otel-lifeline/register'],
  );
}

/** A request to `service` its handler never answers, in flight once this resolves; its trace ID. */
async function inFlight(service: ChildService, path = '/never'): Promise<{ traceId: string; abort: () => Promise<void> }> {
  const traceId = randomBytes(16).toString('hex');
  const controller = new AbortController();
  const answer = fetch(`${service.url}${path}`, {
    headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
    signal: controller.signal,
  }).catch(() => undefined);
  const until = Date.now() + 15_000;
  while (!service.stdout().includes(`"started":"${path}"`) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(service.stdout()).toContain(`"started":"${path}"`);
  return {
    traceId,
    abort: async () => {
      controller.abort();
      await answer;
    },
  };
}

/** Sends a request whose handler ends the process; its trace ID. */
function fatal(service: ChildService, path: string): string {
  const traceId = randomBytes(16).toString('hex');
  void fetch(`${service.url}${path}`, { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } }).catch(
    () => undefined,
  );
  return traceId;
}

const endingSnapshot = (traceId: string) =>
  receiver.spans.find((s) => s.traceId === traceId && s.attributes['lifeline.in_flight'] === true);

describe('a zero-code service ended with a request in flight', () => {
  it('SIGTERM: the request still in flight after the drain is exported before the process exits', async () => {
    const service = await zeroCode('killed-service');
    const request = await inFlight(service);
    try {
      await service.stop(); // SIGTERM, and the process has exited
      const snapshot = endingSnapshot(request.traceId);
      expect(snapshot?.name).toMatch(/^GET .*\(in flight, \d+ s, no deadline, at SIGTERM\)$/);
      expect(snapshot?.kind).toBe(SERVER);
      expect(snapshot?.statusCode).toBe(STATUS_ERROR);
      expect(snapshot?.statusMessage).toMatch(/, at SIGTERM$/);
      // Its handler, by where it is defined: the span started before the handler ran, so its creation stack cannot say.
      expect(snapshot?.attributes['code.file.path']).toBe(join(ROOT, 'test/fixtures/stuck-service.mjs'));
      expect(snapshot?.attributes['code.line.number']).toBe(lineOf('test/fixtures/stuck-service.mjs', 'const server = createServer('));
    } finally {
      await request.abort();
      await service.stop();
    }
  }, 30_000);

  it('SIGINT (Ctrl-C, PM2): the same, and the signal ends the process', async () => {
    const service = await zeroCode('interrupted-service');
    const request = await inFlight(service);
    try {
      await service.kill('SIGINT');
      expect(await service.exited).toEqual({ code: null, signal: 'SIGINT' });
      expect(endingSnapshot(request.traceId)?.name).toMatch(/\(in flight, \d+ s, no deadline, at SIGINT\)$/);
    } finally {
      await request.abort();
    }
  }, 30_000);

  it('an uncaught exception: printed as Node prints it, a span names it (redacted) and links to the request that threw, what was in flight is exported, exit code 1', async () => {
    const service = await zeroCode('crashed-service');
    const request = await inFlight(service);
    try {
      const thrower = fatal(service, '/crash');
      expect(await service.exited).toEqual({ code: 1, signal: null });
      expect(service.stderr()).toMatch(/^Error: order 42 has no customer \(password=hunter2\)\n {4}at /m);
      expect(service.stderr()).toContain(`Node.js ${process.version}`);
      const crash = receiver.spans.find((s) => s.name.startsWith('uncaught exception: Error: order 42 has no customer'));
      expect(crash, JSON.stringify(receiver.spans.map((s) => s.name))).toBeDefined();
      expect(JSON.stringify(crash)).not.toContain('hunter2');
      expect(crash?.statusCode).toBe(STATUS_ERROR);
      expect(crash?.parentSpanId).toBe('');
      expect(crash?.attributes['lifeline.in_flight']).toBe(true);
      const exception = crash?.events.find((e) => e.name === 'exception');
      expect(exception?.attributes['exception.type']).toBe('Error');
      expect(String(exception?.attributes['exception.stacktrace'])).toContain('stuck-service.mjs');
      expect(crash?.links.map((l) => l.traceId)).toEqual([thrower]);
      expect(endingSnapshot(request.traceId)?.name).toMatch(/\(in flight, \d+ s, no deadline, at uncaught exception\)$/);
    } finally {
      await request.abort();
      await service.stop();
    }
  }, 30_000);

  it('an unhandled rejection that ends the process: the same, named as one', async () => {
    const service = await zeroCode('rejected-service');
    const request = await inFlight(service);
    try {
      fatal(service, '/reject');
      expect(await service.exited).toEqual({ code: 1, signal: null });
      expect(service.stderr()).toMatch(/^TypeError: stock service said no\n/m);
      expect(receiver.spans.some((s) => s.name === 'unhandled rejection: TypeError: stock service said no')).toBe(true);
      expect(endingSnapshot(request.traceId)?.name).toMatch(/\(in flight, \d+ s, no deadline, at unhandled rejection\)$/);
    } finally {
      await request.abort();
      await service.stop();
    }
  }, 30_000);

  it('an app with an uncaughtException handler of its own: it decides, and the process lives on untouched', async () => {
    const service = await zeroCode('forgiving-service', { CATCH_ALL: '1' });
    try {
      const thrower = fatal(service, '/crash');
      const until = Date.now() + 15_000;
      while (!service.stdout().includes('"caught"') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(service.stdout()).toContain('"caught":"order 42 has no customer (password=hunter2)"');
      expect(await (await fetch(`${service.url}/`)).text()).toBe('ok');
      await service.stop(); // its last flush: whatever it exported is in by now
      expect(await service.exited).toEqual({ code: null, signal: 'SIGTERM' });
      expect(service.stderr()).not.toContain('order 42');
      expect(receiver.spans.some((s) => s.traceId === thrower)).toBe(true); // the request that threw was exported
      expect(receiver.spans.some((s) => s.links.some((l) => l.traceId === thrower))).toBe(false); // no crash span for it
    } finally {
      await service.stop();
    }
  }, 30_000);
});
