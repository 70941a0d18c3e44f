import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  DeadlineExceededError,
  DeadlineSpanProcessor,
  HealthCatalog,
  installDeadlineDispatcher,
  isDeadlineExceeded,
  withTimeout,
  type InstalledDeadlineDispatcher,
} from '../../src/index.js';
import { instrumentedUndici } from '../support/instrumented.js';
import { answersOk, neverAnswers, serve, type TestServer } from '../support/servers.js';

const tracing = instrumentedUndici([new DeadlineSpanProcessor()]);
const { exporter, provider } = tracing;
let installed: InstalledDeadlineDispatcher;
let ok: TestServer;
let silent: TestServer;
let headers: string[] = [];

beforeAll(async () => {
  tracing.start();
  installed = installDeadlineDispatcher({
    policy: [{ match: { 'url.path': /^\/policed/, 'http.request.method': 'GET' }, timeoutMs: 80 }],
    defaultTimeoutMs: 30_000,
  });
  ok = await serve((req, res) => {
    headers.push(String(req.headers['x-request-timeout-ms']));
    answersOk(req, res);
  });
  silent = await serve(neverAnswers);
});
afterAll(async () => {
  tracing.stop();
  installed.uninstall();
  await Promise.all([ok.close(), silent.close()]);
});
beforeEach(() => {
  exporter.reset();
  headers = [];
});

function clientSpans(): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((s) => s.attributes['http.request.method'] !== undefined);
}

describe('DeadlineSpanProcessor with the undici instrumentation (docs/deadlines.md)', () => {
  it('a client span under a deadline records at, budget and source; the header carries the budget', async () => {
    const before = Date.now();
    await withTimeout(2_000, async () => (await fetch(`${ok.url}/a`)).text());
    const [span] = clientSpans();
    expect(span?.attributes['lifeline.deadline.source']).toBe('scope');
    const at = Date.parse(span?.attributes['lifeline.deadline.at'] as string);
    expect(at).toBeGreaterThanOrEqual(before + 2_000);
    expect(at).toBeLessThanOrEqual(Date.now() + 2_000);
    expect(span?.attributes['lifeline.deadline.budget_ms']).toBeGreaterThan(1_800);
    expect(span?.attributes['lifeline.deadline.missing']).toBeUndefined();
    expect(Number(headers[0])).toBeGreaterThan(1_800);
    expect(Number(headers[0])).toBeLessThanOrEqual(2_000);
  });

  it('a call aborted by its deadline ends ERROR with error.type timeout and lifeline.deadline.exceeded', async () => {
    const error = await withTimeout(100, () => fetch(`${silent.url}/stuck`)).catch((err: unknown) => err);
    expect(isDeadlineExceeded(error)).toBe(true);
    const [span] = clientSpans();
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.attributes['error.type']).toBe('timeout');
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
  });

  it('a client call with no deadline at all records lifeline.deadline.missing', async () => {
    installed.uninstall();
    const bare = installDeadlineDispatcher();
    try {
      await (await fetch(`${ok.url}/unbounded`)).text();
    } finally {
      bare.uninstall();
      installed = installDeadlineDispatcher({
        policy: [{ match: { 'url.path': /^\/policed/, 'http.request.method': 'GET' }, timeoutMs: 80 }],
        defaultTimeoutMs: 30_000,
      });
    }
    const [span] = clientSpans();
    expect(span?.attributes['lifeline.deadline.missing']).toBe(true);
    expect(span?.attributes['lifeline.deadline.source']).toBeUndefined();
    expect(headers[0]).toBe('undefined');
  });

  it('defaultTimeoutMs bounds a call with no deadline: source policy', async () => {
    await (await fetch(`${ok.url}/defaulted`)).text();
    const [span] = clientSpans();
    expect(span?.attributes['lifeline.deadline.source']).toBe('policy');
    expect(span?.attributes['lifeline.deadline.budget_ms']).toBeGreaterThan(29_000);
    expect(span?.attributes['lifeline.deadline.missing']).toBeUndefined();
    expect(Number(headers[0])).toBeGreaterThan(29_000);
  });

  it('a matching rule tightens the context deadline and aborts the call at it: source policy', async () => {
    const started = Date.now();
    const error = await withTimeout(5_000, () => fetch(`${silent.url}/policed/x`)).catch((err: unknown) => err);
    expect(isDeadlineExceeded(error)).toBe(true);
    expect((error as Error).cause).toMatchObject({ source: 'policy' });
    expect(Date.now() - started).toBeLessThan(1_000);
    const [span] = clientSpans();
    expect(span?.attributes['lifeline.deadline.source']).toBe('policy');
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
  });

  it('a rule never loosens a tighter context deadline', async () => {
    await withTimeout(50, () => fetch(`${silent.url}/policed/y`)).catch(() => undefined);
    expect(clientSpans()[0]?.attributes['lifeline.deadline.source']).toBe('scope');
  });

  it('a rule that does not match (method) leaves the call to its context deadline', async () => {
    await withTimeout(2_000, async () => (await fetch(`${ok.url}/policed/z`, { method: 'POST', body: 'x' })).text());
    expect(clientSpans()[0]?.attributes['lifeline.deadline.source']).toBe('scope');
  });

  it('spans inside tick work carry the tick deadline; the tick span keeps its own attributes', async () => {
    const health = new HealthCatalog({ interval: 10_000, tracerProvider: provider });
    try {
      const tick = health.registerLiveness('worker').take();
      await withTimeout(60_000, () =>
        tick?.run(async () => {
          trace.getTracer('app').startSpan('internal work').end();
          await (await fetch(`${ok.url}/tick`)).text();
        }),
      );
      const spans = exporter.getFinishedSpans();
      const byName = (name: string) => spans.find((s) => s.name === name);
      expect(byName('internal work')?.attributes['lifeline.deadline.source']).toBe('tick');
      expect(byName('GET')?.attributes['lifeline.deadline.source']).toBe('tick');
      expect(byName('tick worker')?.attributes['lifeline.deadline.at']).toBe(new Date(tick?.deadline ?? 0).toISOString());
    } finally {
      health.close();
    }
  });

  it('a span whose instrumentation kept only the error message as its status (mongodb) is marked too; other errors are not', () => {
    const tracer = provider.getTracer('app');
    const cut = tracer.startSpan('find', { kind: SpanKind.CLIENT });
    cut.setStatus({ code: SpanStatusCode.ERROR, message: new DeadlineExceededError(Date.now(), 'scope').message });
    cut.end();
    const other = tracer.startSpan('find', { kind: SpanKind.CLIENT });
    other.setStatus({ code: SpanStatusCode.ERROR, message: 'connection reset: deadline exceeded (not ours)' });
    other.end();
    const [marked, unmarked] = exporter.getFinishedSpans().filter((s) => s.name === 'find');
    expect(marked?.attributes).toMatchObject({ 'error.type': 'timeout', 'lifeline.deadline.exceeded': true });
    expect(unmarked?.attributes['lifeline.deadline.exceeded']).toBeUndefined();
  });

  it('a span that ends after its deadline without being cut (it overran) is marked exceeded with how far past; its status stays', async () => {
    const tracer = provider.getTracer('app');
    // A handler that answers after its deadline: nothing cuts a server span.
    await withTimeout(30, async () => {
      const span = tracer.startSpan('GET /slow', { kind: SpanKind.SERVER });
      await new Promise((resolve) => setTimeout(resolve, 80));
      span.setStatus({ code: SpanStatusCode.UNSET });
      span.end();
    });
    // One that ends in time, and one bounded by the headers bound only (no deadline of its own work).
    withTimeout(5_000, () => {
      tracer.startSpan('GET /fast', { kind: SpanKind.SERVER }).end();
    });
    const headersBound = tracer.startSpan('GET', {
      kind: SpanKind.CLIENT,
      attributes: { 'lifeline.deadline.source': 'headers', 'lifeline.deadline.budget_ms': 0 },
    });
    await new Promise((resolve) => setTimeout(resolve, 5));
    headersBound.end();
    const spans = exporter.getFinishedSpans();
    const slow = spans.find((s) => s.name === 'GET /slow');
    expect(slow?.attributes['lifeline.deadline.exceeded']).toBe(true);
    const overdue = slow?.attributes['lifeline.deadline.overdue_ms'];
    expect(typeof overdue).toBe('number');
    // 80 ms of work under 30 ms: at least 50 past; the bound above is the timer's lateness, loaded.
    expect(overdue).toBeGreaterThanOrEqual(45);
    expect(overdue).toBeLessThan(2_000);
    expect(slow?.status.code).toBe(SpanStatusCode.UNSET);
    expect(slow?.attributes['error.type']).toBeUndefined();
    for (const name of ['GET /fast', 'GET']) {
      const span = spans.find((s) => s.name === name);
      expect(span?.attributes['lifeline.deadline.exceeded']).toBeUndefined();
      expect(span?.attributes['lifeline.deadline.overdue_ms']).toBeUndefined();
    }
  });

  it('a call cut by its deadline is not also marked as overran', async () => {
    await withTimeout(50, () => fetch(`${silent.url}/cut`)).catch((err: unknown) => err);
    const [span] = clientSpans();
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(span?.attributes['lifeline.deadline.overdue_ms']).toBeUndefined();
  });

  it('a span started after its deadline is marked by how late it ended, not by its own duration', async () => {
    const tracer = provider.getTracer('app');
    await withTimeout(20, async () => {
      await new Promise((resolve) => setTimeout(resolve, 80)); // the deadline passed ~60 ms ago
      const span = tracer.startSpan('late start', { kind: SpanKind.CLIENT });
      await new Promise((resolve) => setTimeout(resolve, 10));
      span.end();
    });
    const span = exporter.getFinishedSpans().find((s) => s.name === 'late start');
    expect(span?.attributes['lifeline.deadline.budget_ms']).toBe(0);
    expect(span?.attributes['lifeline.deadline.overdue_ms']).toBeGreaterThanOrEqual(65);
  });

  it('a tick span that ends late is left to the tick (it marks itself), not marked as overran', async () => {
    const tracer = provider.getTracer('app');
    const tick = tracer.startSpan('tick poller', {
      attributes: { 'lifeline.health.tick': 3, 'lifeline.deadline.source': 'tick', 'lifeline.deadline.budget_ms': 5 },
    });
    await new Promise((resolve) => setTimeout(resolve, 30));
    tick.end();
    const span = exporter.getFinishedSpans().find((s) => s.name === 'tick poller');
    expect(span?.attributes['lifeline.deadline.overdue_ms']).toBeUndefined();
  });
});
