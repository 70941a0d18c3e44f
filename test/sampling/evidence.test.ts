import { context, SpanStatusCode, TraceFlags, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AlwaysOnSampler,
  ParentBasedSampler,
  RandomIdGenerator,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  DeadlineSpanProcessor,
  HealthCatalog,
  InFlightSpanProcessor,
  installDeadlineDispatcher,
  isDeadlineExceeded,
  withTimeout,
  type InstalledDeadlineDispatcher,
} from '../../src/index.js';
import { SnapshotIdGenerator } from '../../src/diagnostics/index.js';
import { EvidenceSampler, EvidenceSpanProcessor, type EvidenceSpanProcessorOptions } from '../../src/sampling/index.js';
import { instrumentedUndici } from '../support/instrumented.js';
import { neverAnswers, serve, type TestServer } from '../support/servers.js';

// OTEL_TRACES_SAMPLER=parentbased_traceidratio at 0: the sampler drops every routine trace, so
// whatever is exported was kept as evidence.
/** The sampler at 0 %, wrapped: every trace dropped, every span recorded. */
function droppingAll(): EvidenceSampler {
  return new EvidenceSampler(new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0) }));
}
const inFlight = new InFlightSpanProcessor();
const ids = new SnapshotIdGenerator(new RandomIdGenerator());
const tracing = instrumentedUndici([inFlight, new DeadlineSpanProcessor()], {}, ids, {
  sampler: droppingAll(),
  wrapExport: (exporting) => new EvidenceSpanProcessor(exporting, { maxBufferedSpans: 8 }),
});
const { exporter, provider } = tracing;
const tracer: Tracer = provider.getTracer('test');
let installed: InstalledDeadlineDispatcher;
let silent: TestServer;
const catalogs: HealthCatalog[] = [];
const pending: Promise<unknown>[] = [];

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()); // as the SDK registers it
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
});
afterEach(async () => {
  for (const health of catalogs.splice(0)) health.close();
  await silent.close();
  silent = await serve(neverAnswers); // drop the stuck connections
  await Promise.allSettled(pending.splice(0));
});

/** A trace of `names` ended one after the other under one root, the root last with `rootStatus`. */
function trace3(rootStatus: SpanStatusCode = SpanStatusCode.UNSET, names = ['a', 'b']): string {
  return tracer.startActiveSpan('root', (root) => {
    for (const name of names) tracer.startSpan(name).end();
    root.setStatus({ code: rootStatus });
    root.end();
    return root.spanContext().traceId;
  });
}
/** An EvidenceSpanProcessor whose wrapped processor notes the names of the spans it is given to export. */
function recording(options: EvidenceSpanProcessorOptions): { names: string[]; processor: EvidenceSpanProcessor } {
  const names: string[] = [];
  const noted: SpanProcessor = {
    onStart: () => undefined,
    onEnd: (span) => names.push(span.name),
    forceFlush: () => Promise.resolve(),
    shutdown: () => Promise.resolve(),
  };
  return { names, processor: new EvidenceSpanProcessor([noted], options) };
}
const exportedOf = (traceId: string): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);

describe('head sampling keeps the evidence (EvidenceSampler + EvidenceSpanProcessor)', () => {
  it('a routine trace the sampler drops is recorded (processors see it) but not exported', () => {
    let recording: boolean | undefined;
    const traceId = tracer.startActiveSpan('routine', (span) => {
      recording = span.isRecording();
      expect(inFlight.get(span.spanContext().spanId)).toBeDefined(); // tracked in flight
      expect(span.spanContext().traceFlags & TraceFlags.SAMPLED).toBe(0);
      span.end();
      return span.spanContext().traceId;
    });
    expect(recording).toBe(true);
    expect(exportedOf(traceId)).toEqual([]);
  });

  it('a trace whose span fails is exported whole: the spans that ended before it, and those after, flagged sampled', () => {
    const traceId = trace3(SpanStatusCode.ERROR);
    const names = exportedOf(traceId).map((s) => s.name);
    expect(names).toEqual(['a', 'b', 'root']);
    for (const span of exportedOf(traceId)) expect(span.spanContext().traceFlags & TraceFlags.SAMPLED).toBe(TraceFlags.SAMPLED);
    expect(exportedOf(trace3())).toEqual([]); // the next routine trace is not
  });

  it('what it holds is bounded: past maxBufferedSpans the oldest held spans are dropped', () => {
    const traceId = trace3(SpanStatusCode.ERROR, ['s1', 's2', 's3', 's4', 's5', 's6', 's7', 's8', 's9', 's10']);
    // 8 held at most: s1 and s2 went first; the failing root is exported as it ends.
    expect(exportedOf(traceId).map((s) => s.name)).toEqual(['s3', 's4', 's5', 's6', 's7', 's8', 's9', 's10', 'root']);
  });

  it('what it holds is bounded in bytes too: a span past maxBufferedBytes pushes the oldest out', () => {
    const { names: held, processor } = recording({ maxBufferedBytes: 6_144 });
    const bigTracer = new TracerProvider({ sampler: droppingAll(), spanProcessors: [processor] }).getTracer('test');
    bigTracer.startActiveSpan('root', (root) => {
      for (const name of ['big1', 'big2', 'big3']) bigTracer.startSpan(name, { attributes: { 'url.full': 'x'.repeat(1_500) } }).end();
      root.setStatus({ code: SpanStatusCode.ERROR });
      root.end();
    });
    // ~2.5 KB each as held on the heap (the span, its name, a 1.5 KB string): two fit in 6 KiB, so big1 went when big3 came.
    expect(held).toEqual(['big2', 'big3', 'root']);
  });

  it('the byte bound pushes out the oldest held spans, past the holes a trace kept as evidence left', () => {
    const { names: exported, processor } = recording({ maxBufferedSpans: 1_000, maxBufferedBytes: 8_192 });
    const dropping = new TracerProvider({ sampler: droppingAll(), spanProcessors: [processor] }).getTracer('test');
    const attributes = { 'url.full': 'x'.repeat(1_500) }; // ~2.5 KB a span: three fit
    const rootX = dropping.startSpan('x root');
    const inX = trace.setSpan(context.active(), rootX);
    for (const name of ['x1', 'x2']) dropping.startSpan(name, { attributes }, inX).end();
    const rootY = dropping.startSpan('y root');
    dropping.startSpan('y1', { attributes }, trace.setSpan(context.active(), rootY)).end();
    rootY.setStatus({ code: SpanStatusCode.ERROR });
    rootY.end(); // y1 exported with its trace: a hole after x2
    for (const name of ['x3', 'x4', 'x5']) dropping.startSpan(name, { attributes }, inX).end(); // x1, then x2 pushed out
    rootX.setStatus({ code: SpanStatusCode.ERROR });
    rootX.end();
    expect(exported).toEqual(['y1', 'y root', 'x3', 'x4', 'x5', 'x root']);
  });

  it('a failing span of a sampled trace does not take the place of a dropped trace kept as evidence', () => {
    const { names: exported, processor } = recording({ maxEvidenceTraces: 1 });
    const dropping = new TracerProvider({ sampler: droppingAll(), spanProcessors: [processor] }).getTracer('test');
    const sampling = new TracerProvider({ sampler: new EvidenceSampler(new AlwaysOnSampler()), spanProcessors: [processor] }).getTracer(
      'test',
    );
    dropping.startActiveSpan('dropped root', (root) => {
      const failed = dropping.startSpan('failed call');
      failed.setStatus({ code: SpanStatusCode.ERROR });
      failed.end(); // the dropped trace is evidence now (the only one remembered)
      const other = sampling.startSpan('sampled failure');
      other.setStatus({ code: SpanStatusCode.ERROR });
      other.end(); // sampled: exported as it is, remembering nothing
      root.end(); // still evidence: exported
    });
    expect(exported).toEqual(['failed call', 'sampled failure', 'dropped root']);
  });

  it('a call its deadline ended is exported with its trace, although the sampler dropped the trace', async () => {
    let traceId = '';
    const error = await tracer.startActiveSpan('handler', async (root) => {
      traceId = root.spanContext().traceId;
      try {
        return await withTimeout(100, () => fetch(`${silent.url}/slow`)).catch((err: unknown) => err);
      } finally {
        root.end();
      }
    });
    expect(isDeadlineExceeded(error)).toBe(true);
    const spans = exportedOf(traceId);
    expect(spans.map((s) => s.name)).toEqual(['GET', 'handler']);
    expect(spans[0]?.attributes['lifeline.deadline.exceeded']).toBe(true);
  });

  it('a stuck call is tracked in flight, explained by a verdict, and its trace exported with the snapshots', async () => {
    const health = new HealthCatalog({
      interval: 60_000,
      tracerProvider: provider,
      diagnostics: { inFlight, tracerProvider: provider, ids },
    });
    catalogs.push(health);
    const h = health.registerLiveness('poller');
    h.take();
    const tick = h.take();
    let earlier = '';
    let tickFlags: number | undefined;
    pending.push(
      tick?.run(async () => {
        tickFlags = trace.getActiveSpan()?.spanContext().traceFlags;
        const done = tracer.startSpan('read config'); // ended before the call got stuck
        earlier = done.spanContext().spanId;
        done.end();
        return (await fetch(`${silent.url}/stuck`)).text();
      }) ?? Promise.resolve(),
    );
    const traceId = tick?.spanContext.traceId ?? '';
    // The GET is on the wire once its span is tracked in flight.
    while (!inFlight.spansOf(tick?.spanContext.traceId ?? '').some((s) => s.span.name === 'GET'))
      await new Promise((resolve) => setImmediate(resolve));
    expect(tickFlags).toBe(TraceFlags.NONE); // the sampler dropped the tick's trace
    health.runRound();
    health.runRound();
    health.runRound(); // buffer full: unhealthy, and the verdict
    expect(health.status('live').unhealthy).toEqual(['poller']);
    const [verdict] = exporter.getFinishedSpans().filter((s) => s.name.startsWith('health verdict'));
    expect(
      verdict?.attributes['lifeline.diagnostic.span_tree'] ?? verdict?.events[0]?.attributes?.['lifeline.diagnostic.span_tree'],
    ).toContain('"name":"GET"');
    const names = exportedOf(traceId).map((s) => s.name);
    expect(names).toContain('tick poller (in flight)');
    expect(names).toContain(`GET 127.0.0.1:${String(silent.port)} (in flight)`);
    expect(exportedOf(traceId).find((s) => s.spanContext().spanId === earlier)?.name).toBe('read config'); // held, then kept
  });
});
