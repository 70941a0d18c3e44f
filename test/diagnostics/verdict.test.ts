import { SpanStatusCode } from '@opentelemetry/api';
import { RandomIdGenerator, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  DeadlineSpanProcessor,
  Diagnostics,
  HealthCatalog,
  InFlightSpanProcessor,
  installDeadlineDispatcher,
  startProbeServer,
  type InstalledDeadlineDispatcher,
  isDeadlineExceeded,
  withTimeout,
  type DiagnosticSnapshot,
  type InFlightNode,
  type Logger,
} from '../../src/index.js';
import { SnapshotIdGenerator } from '../../src/diagnostics/index.js';
import { RedactionSpanProcessor } from '../../src/sdk/index.js';
import { instrumentedUndici } from '../support/instrumented.js';
import { neverAnswers, serve, type TestServer } from '../support/servers.js';

const TOKEN = 'tok-SECRET-7f3a';
const BEARER = 'Bearer auth-SECRET-9c1d';
const inFlight = new InFlightSpanProcessor();
// The provider's ID generator is lifeline's, as startLifeline makes it.
const ids = new SnapshotIdGenerator(new RandomIdGenerator());
// Record the authorization header as a span attribute: redaction has to catch it (the dumps' own,
// for the stuck spans that never end; the redaction processor's, as in startLifeline, for the rest).
const tracing = instrumentedUndici(
  [inFlight, new DeadlineSpanProcessor(), new RedactionSpanProcessor()],
  { headersToSpanAttributes: { requestHeaders: ['authorization'] } },
  ids,
);
const { exporter, provider } = tracing;
let installed: InstalledDeadlineDispatcher;
let silent: TestServer;
let lines: { level: string; obj: object; msg: string }[] = [];
const logger: Logger = {
  warn: (obj, msg) => lines.push({ level: 'warn', obj, msg }),
  info: (obj, msg) => lines.push({ level: 'info', obj, msg }),
  debug: (obj, msg) => lines.push({ level: 'debug', obj, msg }),
};
const catalogs: HealthCatalog[] = [];
const pending: Promise<unknown>[] = [];

beforeAll(async () => {
  tracing.start();
  installed = installDeadlineDispatcher();
  silent = await serve(neverAnswers);
});
afterAll(async () => {
  tracing.stop();
  installed.uninstall();
  await silent.close();
});
beforeEach(() => {
  exporter.reset();
  lines = [];
});
afterEach(async () => {
  for (const health of catalogs.splice(0)) health.close();
  await silent.close();
  silent = await serve(neverAnswers); // drop the stuck connections
  await Promise.allSettled(pending.splice(0));
});

function catalog(diagnostics: { minIntervalMs?: number; maxBytes?: number; log?: 'debug' | 'info' } = {}): HealthCatalog {
  const health = new HealthCatalog({
    interval: 60_000,
    tracerProvider: provider,
    diagnostics: { inFlight, tracerProvider: provider, logger, ids, ...diagnostics },
  });
  catalogs.push(health);
  return health;
}

/** The user's code: a poller whose call to the upstream never comes back. */
async function pollUpstream(url: string): Promise<string> {
  const response = await fetch(`${url}/v1/items?page=2&token=${TOKEN}`, { headers: { authorization: BEARER } });
  return response.text();
}

/** Registers `poller`, starts one stuck poll in its tick, and steps rounds until it is unhealthy; returns the tick's trace. */
async function stuckPoller(health: HealthCatalog): Promise<string | undefined> {
  const h = health.registerLiveness('poller');
  h.take();
  const tick = h.take();
  pending.push(tick?.run(() => pollUpstream(silent.url)) ?? Promise.resolve());
  await new Promise((resolve) => setTimeout(resolve, 50)); // the GET is on the wire
  health.runRound(); // healthy: its buffer had room
  health.runRound(); // still room
  expect(health.status('live').ok).toBe(true);
  health.runRound(); // buffer full: healthy -> unhealthy
  expect(health.status('live').unhealthy).toEqual(['poller']);
  return tick?.spanContext.traceId;
}

/** A snapshot of `reporter` stuck in `GET reports.internal:8080/report`, `deadlineMs` from its deadline (negative: past it). */
function reporterStuck(deadlineMs: number): { tick: InFlightNode; stuck: DiagnosticSnapshot } {
  const now = Date.now();
  const node = (name: string, spanId: string, children: InFlightNode[], attributes: InFlightNode['attributes'] = {}): InFlightNode => ({
    name,
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId,
    parentSpanId: undefined,
    ageMs: 4_000,
    startedAt: now - 4_000,
    deadline: { at: now + deadlineMs, remainingMs: deadlineMs },
    attributes,
    origin: 'reportDaily (/srv/app/report.mjs:12:9)',
    stack: 'at reportDaily (/srv/app/report.mjs:12:9)',
    children,
  });
  const tick = node('tick reporter', '00f067aa0ba902b6', [
    node('GET', '00f067aa0ba902b7', [], { 'url.full': 'http://reports.internal:8080/report?day=1' }),
  ]);
  const process = { pid: 1, uptimeS: 1, handles: [], activeResources: {}, eventLoopDelayMs: { p50: 0, p99: 0, max: 0 } };
  return {
    tick,
    stuck: {
      at: now,
      unhealthy: ['reporter'],
      components: [
        {
          name: 'reporter',
          probe: 'liveness',
          tick: { traceId: tick.traceId, spanId: tick.spanId, seq: 3, deadline: now + deadlineMs },
          inFlight: [tick],
          omitted: 0,
        },
      ],
      process,
      evicted: 0,
    },
  };
}

const verdicts = (): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name.startsWith('health verdict'));
const named = (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name === name);

describe('an unhealthy verdict explains itself (docs/diagnostics.md)', () => {
  it('exports the verdict with the in-flight tree, the stacks and the socket, plus snapshot spans', async () => {
    const health = catalog();
    const tickTrace = await stuckPoller(health);
    const [verdict, ...more] = verdicts();
    expect(more).toEqual([]);
    expect(verdict?.name).toBe('health verdict: poller'); // what a search result row shows
    expect(verdict?.status.code).toBe(SpanStatusCode.ERROR);
    expect(verdict?.attributes['lifeline.health.unhealthy']).toEqual(['poller']);
    const event = verdict?.events.find((e) => e.name === 'lifeline.diagnostic');
    const summary = String(event?.attributes?.['lifeline.diagnostic.overview']);
    const tree = String(event?.attributes?.['lifeline.diagnostic.span_tree']);
    const stacks = String(event?.attributes?.['lifeline.diagnostic.stacks']);
    expect(Object.keys(event?.attributes ?? {})[0]).toBe('lifeline.diagnostic.overview'); // read first
    expect(summary).toMatch(
      new RegExp(
        `^poller \\(liveness\\) is unhealthy:\n  GET http://127\\.0\\.0\\.1:${String(silent.port)}/v1/items\\?page=2&token=REDACTED \\(in flight \\d\\.\\d s, deadline in \\d+\\.\\d s\\) from pollUpstream \\(`,
      ),
    );
    expect(event?.attributes?.['lifeline.diagnostic.truncated']).toBe(false);
    expect(tree).toContain('"name":"tick poller"');
    expect(tree).toContain('"name":"GET"');
    expect(tree).toContain('/v1/items');
    expect(stacks).toContain('pollUpstream'); // the function that made the call
    expect(stacks).toMatch(new RegExp(`tcp 127\\.0\\.0\\.1:\\d+ -> 127\\.0\\.0\\.1:${silent.port}`)); // the socket to the server
    // One child per unhealthy component, found by its name, linked both ways with the stuck tick's snapshot.
    const [why] = named('poller unhealthy');
    expect(why?.parentSpanContext?.spanId).toBe(verdict?.spanContext().spanId);
    expect(why?.attributes['lifeline.health.component']).toBe('poller');
    expect(why?.status.message).toBe(summary);
    const [tickSnapshot] = named('tick poller (in flight)');
    expect(why?.links.map((l) => l.context.spanId)).toEqual([tickSnapshot?.spanContext().spanId]);
    expect(tickSnapshot?.links.map((l) => l.context.spanId)).toEqual([why?.spanContext().spanId]);
    // Snapshot spans: the root of the stuck tick's own trace (its real span has not ended), a tree, flagged in flight.
    expect(tickSnapshot?.spanContext().traceId).toBe(tickTrace);
    expect(tickSnapshot?.parentSpanContext).toBeUndefined();
    const [getSnapshot] = named(`GET 127.0.0.1:${String(silent.port)} (in flight)`);
    expect(getSnapshot?.attributes['lifeline.in_flight']).toBe(true);
    expect(getSnapshot?.attributes['lifeline.deadline.exceeded']).toBeUndefined(); // not yet past its deadline
    expect(getSnapshot?.status.code).toBe(SpanStatusCode.UNSET);
    expect(tickSnapshot?.attributes['lifeline.in_flight']).toBe(true);
    expect(getSnapshot?.spanContext().traceId).toBe(tickTrace);
    expect(getSnapshot?.parentSpanContext?.spanId).toBe(tickSnapshot?.spanContext().spanId);
    // Names at INFO; the dump at DEBUG by default.
    expect(lines.find((l) => l.level === 'info')?.obj).toMatchObject({ unhealthy: ['poller'] });
    expect(lines.find((l) => l.msg === 'health diagnostic')?.level).toBe('debug');
  });

  it('no token in the query and no authorization header reaches any span, event or log line', async () => {
    const health = catalog({ log: 'info' });
    await stuckPoller(health);
    const everything = JSON.stringify([
      exporter
        .getFinishedSpans()
        .map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, links: s.links, status: s.status })),
      lines,
      health.diagnose(),
    ]);
    expect(everything).toContain('/v1/items');
    expect(everything).toContain('REDACTED');
    expect(everything).not.toContain(TOKEN);
    expect(everything).not.toContain('auth-SECRET');
    expect(lines.find((l) => l.msg === 'health diagnostic')?.level).toBe('info');
  });

  it('health.diagnose() returns the same snapshot as an object', async () => {
    const health = catalog();
    await stuckPoller(health);
    const snapshot = health.diagnose();
    expect(snapshot.unhealthy).toEqual(['poller']);
    const [root] = snapshot.components[0]?.inFlight ?? [];
    expect(root?.name).toBe('tick poller');
    expect(root?.children[0]?.name).toBe('GET');
    expect(root?.children[0]?.attributes['url.full']).toContain('token=REDACTED');
    expect(root?.children[0]?.origin).toContain('pollUpstream');
    expect(root?.children[0]?.ageMs).toBeGreaterThanOrEqual(40);
    expect(snapshot.process.handles.some((h) => h.type === 'tcp' && h.details.endsWith(`:${silent.port}`))).toBe(true);
  });

  it('rate limits: no new verdict while it stays unhealthy within minIntervalMs; re-emitted after it', async () => {
    const health = catalog({ minIntervalMs: 200 });
    await stuckPoller(health);
    health.runRound();
    health.runRound();
    expect(verdicts()).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 220));
    health.runRound();
    expect(verdicts()).toHaveLength(2);
    // A span still in flight is exported once: the second verdict links to the first snapshot.
    const snapshots = exporter.getFinishedSpans().filter((s) => s.attributes['lifeline.in_flight'] === true);
    expect(snapshots.map((s) => s.name).sort()).toEqual([`GET 127.0.0.1:${String(silent.port)} (in flight)`, 'tick poller (in flight)']);
    const whys = named('poller unhealthy');
    expect(whys.map((w) => w.links.map((l) => l.context.spanId))).toEqual([
      [snapshots.find((s) => s.name.startsWith('tick'))?.spanContext().spanId],
      [snapshots.find((s) => s.name.startsWith('tick'))?.spanContext().spanId],
    ]);
  });

  it('a call past its deadline and still in flight: its snapshot is an error, says by how much, and is marked exceeded', () => {
    // Without lifeline's ID generator in the provider, a stuck tick's snapshot is a trace of its own.
    const plain = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
    const diagnostics = new Diagnostics({ tracerProvider: plain, logger, ids });
    const { tick, stuck } = reporterStuck(-2_300);
    diagnostics.onEventLoopBlock({ blockedMs: 0 }, () => stuck);
    const [call] = named('GET reports.internal:8080 (in flight, 2 s past deadline)');
    expect(call?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'in flight 4.0 s, 2.3 s past its deadline' });
    expect(call?.attributes).toMatchObject({
      'lifeline.deadline.exceeded': true,
      'lifeline.in_flight.overdue_ms': 2_300,
      'lifeline.in_flight.age_ms': 4_000,
    });
    const [root] = named('tick reporter (in flight, 2 s past deadline)');
    expect(root?.status.code).toBe(SpanStatusCode.ERROR);
    expect(root?.parentSpanContext).toBeUndefined();
    expect(root?.spanContext().traceId).not.toBe(tick.traceId); // a trace of its own
    expect(call?.parentSpanContext?.spanId).toBe(root?.spanContext().spanId);
    const summary = String(verdicts()[0]?.events[0]?.attributes?.['lifeline.diagnostic.overview']);
    expect(summary).toBe(
      'reporter (liveness) is unhealthy:\n  GET http://reports.internal:8080/report?day=1 (in flight 4.0 s, 2.3 s past its deadline) from reportDaily (/srv/app/report.mjs:12:9)',
    );
  });

  it('a snapshot taken before the deadline is exported again once it has passed, then not again', () => {
    const diagnostics = new Diagnostics({ tracerProvider: provider, logger, ids, minIntervalMs: 0 });
    const snapshots = (): string[] =>
      exporter
        .getFinishedSpans()
        .filter((s) => s.attributes['lifeline.in_flight'] === true)
        .map((s) => s.name);
    diagnostics.onEventLoopBlock({ blockedMs: 0 }, () => reporterStuck(500).stuck);
    expect(snapshots()).toEqual(['tick reporter (in flight)', 'GET reports.internal:8080 (in flight)']);
    diagnostics.onEventLoopBlock({ blockedMs: 0 }, () => reporterStuck(-2_300).stuck);
    diagnostics.onEventLoopBlock({ blockedMs: 0 }, () => reporterStuck(-3_300).stuck);
    expect(snapshots()).toEqual([
      'tick reporter (in flight)',
      'GET reports.internal:8080 (in flight)',
      'tick reporter (in flight, 2 s past deadline)',
      'GET reports.internal:8080 (in flight, 2 s past deadline)',
    ]);
    expect(verdicts()).toHaveLength(3);
  });

  it("a verdict's own spans are not tracked: a full tracker keeps the stuck spans it shows", () => {
    const small = new InFlightSpanProcessor({ maxSpans: 2 });
    const tracked = new TracerProvider({ spanProcessors: [small, new SimpleSpanProcessor({ exporter })] });
    const work = [tracked.getTracer('app').startSpan('stuck 1'), tracked.getTracer('app').startSpan('stuck 2')];
    new Diagnostics({ inFlight: small, tracerProvider: tracked, logger }).onEventLoopBlock(
      { blockedMs: 0 },
      () => reporterStuck(-2_300).stuck,
    );
    expect(exporter.getFinishedSpans().filter((s) => s.attributes['lifeline.in_flight'] === true)).toHaveLength(2);
    expect({ size: small.size, evicted: small.evicted }).toEqual({ size: 2, evicted: 0 });
    for (const span of work) span.end();
  });

  it("a block of the event loop past the catalog's limit is recorded as a verdict: where, how long, linked to the watchdog's span; rate limited; redacted", async () => {
    const diagnostics = new Diagnostics({ inFlight, tracerProvider: provider, logger, minIntervalMs: 200 });
    const health = catalog();
    let built = 0;
    const snapshot = () => {
      built++;
      return { ...health.diagnose(), unhealthy: ['healthcheck'] };
    };
    const watchdogSpan = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331' };
    diagnostics.onEventLoopBlock(
      { blockedMs: 6_123.4, blockedIn: `crunchReport (/srv/app.js:8) ?token=${TOKEN}`, span: watchdogSpan },
      snapshot,
    );
    diagnostics.onEventLoopBlock({ blockedMs: 7_000 }, snapshot);
    expect(verdicts()).toHaveLength(1);
    expect(built).toBe(1); // a verdict the rate limit drops costs no snapshot
    const [verdict] = verdicts();
    expect(verdict?.attributes['lifeline.health.unhealthy']).toEqual(['healthcheck']);
    expect(verdict?.attributes['lifeline.event_loop.blocked_ms']).toBe(6_123);
    expect(verdict?.attributes['lifeline.event_loop.blocked_in']).toMatch(/^crunchReport \(\/srv\/app\.js:8\) \?token=/);
    expect(verdict?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: expect.stringMatching(
        /^unhealthy: healthcheck \(event loop blocked for 6\.1 s in crunchReport \(\/srv\/app\.js:8\)/,
      ) as string,
    });
    expect(verdict?.links.map((l) => l.context.spanId)).toEqual([watchdogSpan.spanId]);
    expect(JSON.stringify(verdict?.attributes)).not.toContain(TOKEN);
    expect(verdict?.status.message).not.toContain(TOKEN);
    await new Promise((resolve) => setTimeout(resolve, 220));
    diagnostics.onEventLoopBlock({ blockedMs: 7_000 }, snapshot);
    expect(verdicts()).toHaveLength(2);
    expect(verdicts()[1]?.links).toEqual([]);
  });

  it('caps every diagnostic attribute at maxBytes and says so', async () => {
    const health = catalog({ maxBytes: 256 });
    await stuckPoller(health);
    const event = verdicts()[0]?.events.find((e) => e.name === 'lifeline.diagnostic');
    expect(event?.attributes?.['lifeline.diagnostic.truncated']).toBe(true);
    for (const key of ['lifeline.diagnostic.span_tree', 'lifeline.diagnostic.stacks']) {
      expect(Buffer.byteLength(String(event?.attributes?.[key]))).toBeLessThanOrEqual(256);
    }
  });

  it('a verdict with no in-flight spans still says who is unhealthy and what the process holds', async () => {
    const health = catalog();
    const h = health.registerLiveness('idle');
    h.take();
    await h.take()?.run(() => Promise.resolve()); // work done and ended
    health.runRound();
    health.runRound();
    health.runRound();
    const event = verdicts()[0]?.events.find((e) => e.name === 'lifeline.diagnostic');
    expect(verdicts()[0]?.attributes['lifeline.health.unhealthy']).toEqual(['idle']);
    expect(JSON.parse(String(event?.attributes?.['lifeline.diagnostic.span_tree']))).toEqual([
      expect.objectContaining({ component: 'idle', inFlight: [] }),
    ]);
    expect(String(event?.attributes?.['lifeline.diagnostic.stacks'])).toContain('libuv handles:');
    expect(exporter.getFinishedSpans().filter((s) => s.attributes['lifeline.in_flight'] === true)).toEqual([]);
  });

  it("a call its deadline aborted says which of the user's functions made it (code.* from its creation stack)", async () => {
    const health = catalog();
    const h = health.registerLiveness('caller');
    const tick = h.take();
    const failure: unknown = await tick?.run(() => withTimeout(100, () => pollUpstream(silent.url))).catch((error: unknown) => error);
    expect(isDeadlineExceeded(failure)).toBe(true);
    const [get] = exporter.getFinishedSpans().filter((s) => s.name === 'GET' && s.status.code === SpanStatusCode.ERROR);
    expect(get?.attributes).toMatchObject({
      'code.function.name': 'pollUpstream',
      'code.file.path': fileURLToPath(import.meta.url),
      'code.line.number': expect.any(Number) as number,
      'code.column.number': expect.any(Number) as number,
    });
    expect(String(get?.attributes['code.stacktrace'])).toMatch(/^at pollUpstream \(/);
  });

  it('/debug/diagnostics: 404 when off; JSON for a loopback client when on', async () => {
    const health = catalog();
    await stuckPoller(health);
    const off = await startProbeServer({ health, port: 0, logger });
    const on = await startProbeServer({ health, port: 0, logger, debugDiagnostics: true });
    try {
      expect((await fetch(`${off.url}/debug/diagnostics`)).status).toBe(404);
      const res = await fetch(`${on.url}/debug/diagnostics`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { unhealthy: string[] };
      expect(body.unhealthy).toEqual(['poller']);
      expect(JSON.stringify(body)).not.toContain(TOKEN);
      expect((await fetch(`${on.url}/debug/diagnostics`, { method: 'POST' })).status).toBe(405);
    } finally {
      await Promise.all([off.close(), on.close()]);
    }
  });
});

describe('InFlightSpanProcessor', () => {
  it('evicts the oldest span when full, and counts it', () => {
    const small = new InFlightSpanProcessor({ maxSpans: 3 });
    const tracer = new TracerProvider({ spanProcessors: [small] }).getTracer('t');
    const spans = Array.from({ length: 5 }, (_, i) => tracer.startSpan(`s${i}`));
    expect(small.size).toBe(3);
    expect(small.evicted).toBe(2);
    expect(small.spansOf(spans[0]?.spanContext().traceId ?? '')).toEqual([]);
    expect(small.spansOf(spans[4]?.spanContext().traceId ?? '').map((t) => t.spanId)).toEqual([spans[4]?.spanContext().spanId]);
    for (const span of spans) span.end();
    expect(small.size).toBe(0);
  });

  it('evicts the oldest spans when their stacks pass maxStackBytes, counts them, and frees the bytes of ended spans', () => {
    // One call site: every stack has the same text, so the same size.
    const start = (tracer: ReturnType<TracerProvider['getTracer']>) => tracer.startSpan('s');
    const measure = new InFlightSpanProcessor({ captureStacks: 'all' });
    const one = start(new TracerProvider({ spanProcessors: [measure] }).getTracer('t'));
    const bytes = measure.get(one.spanContext().spanId)?.stack?.length ?? 0;
    expect(bytes).toBeGreaterThan(0);
    const small = new InFlightSpanProcessor({ captureStacks: 'all', maxStackBytes: 3 * bytes });
    const tracer = new TracerProvider({ spanProcessors: [small] }).getTracer('t');
    const spans = Array.from({ length: 5 }, () => start(tracer));
    expect(small.size).toBe(3);
    expect(small.evicted).toBe(2);
    expect(small.get(spans[0]?.spanContext().spanId ?? '')).toBeUndefined();
    expect(small.get(spans[4]?.spanContext().spanId ?? '')?.stack).toContain('verdict.test.ts');
    for (const span of spans) span.end();
    const more = Array.from({ length: 3 }, () => start(tracer));
    expect(small.size).toBe(3);
    expect(small.evicted).toBe(2); // the ended spans gave their bytes back
    for (const span of [one, ...more]) span.end();
  });

  it('captures creation stacks per captureStacks, and rejects bad options', () => {
    for (const [mode, expected] of [
      ['off', false],
      ['all', true],
      ['ticks', false],
    ] as const) {
      const processor = new InFlightSpanProcessor({ captureStacks: mode });
      const span = new TracerProvider({ spanProcessors: [processor] }).getTracer('t').startSpan('plain');
      expect(processor.spansOf(span.spanContext().traceId)[0]?.stack !== undefined).toBe(expected);
      span.end();
    }
    expect(() => new InFlightSpanProcessor({ captureStacks: 'some' as 'off' })).toThrow(/captureStacks: "some"/);
    expect(() => new InFlightSpanProcessor({ maxSpans: 0 })).toThrow(/maxSpans: 0/);
    expect(() => new InFlightSpanProcessor({ maxStackBytes: 0 })).toThrow(/maxStackBytes: 0/);
    expect(() => new InFlightSpanProcessor({ maxStackBytes: 1.5 })).toThrow(/maxStackBytes: 1\.5/);
  });
});
