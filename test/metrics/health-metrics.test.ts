import { context, type Attributes } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader, type DataPoint } from '@opentelemetry/sdk-metrics';
import { ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  DeadlineSpanProcessor,
  HealthCatalog,
  installDeadlineDispatcher,
  installHealthMetrics,
  withTimeout,
  type InstalledDeadlineDispatcher,
} from '../../src/index.js';
import { EvidenceSampler } from '../../src/sampling/index.js';
import { DeadlineMetricsSpanProcessor } from '../../src/sdk/index.js';
import { instrumentedUndici } from '../support/instrumented.js';
import { answersOk, neverAnswers, serve, type TestServer } from '../support/servers.js';

/** A reader collected on demand, as an exporter's periodic reader would at its interval. */
class OnDemandReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Every data point of metric `name` in one collection. */
async function points(reader: MetricReader, name: string): Promise<DataPoint<number>[]> {
  const { resourceMetrics } = await reader.collect();
  return resourceMetrics.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .filter((metric) => metric.descriptor.name === name)
    .flatMap((metric) => metric.dataPoints as DataPoint<number>[]);
}
const valueOf = (all: DataPoint<number>[], attributes: Attributes): number | undefined =>
  all.find((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))?.value;

const catalogs: HealthCatalog[] = [];
afterEach(() => {
  for (const health of catalogs.splice(0)) health.close();
});

describe('health as metrics (installHealthMetrics)', () => {
  it('per component: status, tick lag and the times it turned unhealthy; components by state', async () => {
    const reader = new OnDemandReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    const health = new HealthCatalog({ interval: 60_000 });
    catalogs.push(health);
    const busy = health.registerLiveness('busy');
    const stuck = health.registerLiveness('stuck');
    health.registerReadiness('never-started'); // never takes a tick: unhealthy from the start
    const installed = installHealthMetrics(health, { meterProvider });
    const drain = () => {
      while (busy.take() !== undefined);
    };
    for (const h of [busy, stuck]) while (h.take() !== undefined);
    health.runRound(); // both took their ticks: healthy
    drain();
    health.runRound();
    drain();
    health.runRound();
    health.runRound(); // `stuck` took nothing for three rounds: its buffer is full, it turned unhealthy
    drain();

    // A millisecond on, so the tick `stuck` has not taken has measurably waited.
    for (const start = Date.now(); Date.now() === start;) await new Promise((resolve) => setImmediate(resolve));
    const status = await points(reader, 'lifeline.health.status');
    expect(valueOf(status, { 'lifeline.health.component': 'busy', 'lifeline.health.probe': 'liveness' })).toBe(1);
    expect(valueOf(status, { 'lifeline.health.component': 'stuck' })).toBe(0);
    expect(valueOf(status, { 'lifeline.health.component': 'never-started', 'lifeline.health.probe': 'readiness' })).toBe(0);
    const lag = await points(reader, 'lifeline.health.tick.lag');
    expect(valueOf(lag, { 'lifeline.health.component': 'busy' })).toBe(0);
    expect(valueOf(lag, { 'lifeline.health.component': 'stuck' })).toBeGreaterThan(0); // its oldest tick has waited since a round ago
    const verdicts = await points(reader, 'lifeline.health.verdicts');
    expect(valueOf(verdicts, { 'lifeline.health.component': 'stuck' })).toBe(1);
    expect(valueOf(verdicts, { 'lifeline.health.component': 'busy' })).toBe(0);
    const components = await points(reader, 'lifeline.health.components');
    expect(valueOf(components, { 'lifeline.health.probe': 'liveness', 'lifeline.health.state': 'healthy' })).toBe(1);
    expect(valueOf(components, { 'lifeline.health.probe': 'liveness', 'lifeline.health.state': 'unhealthy' })).toBe(1);
    expect(valueOf(components, { 'lifeline.health.probe': 'readiness', 'lifeline.health.state': 'unhealthy' })).toBe(1);
    expect(await points(reader, 'lifeline.event_loop.delay.p99')).toHaveLength(1);

    // `stuck` recovers: no series stays at its old value.
    while (stuck.take() !== undefined);
    drain();
    health.runRound();
    expect(valueOf(await points(reader, 'lifeline.health.status'), { 'lifeline.health.component': 'stuck' })).toBe(1);
    const after = await points(reader, 'lifeline.health.components');
    expect(valueOf(after, { 'lifeline.health.probe': 'liveness', 'lifeline.health.state': 'unhealthy' })).toBe(0);
    expect(valueOf(after, { 'lifeline.health.probe': 'liveness', 'lifeline.health.state': 'healthy' })).toBe(2);

    installed.uninstall();
    for (let i = 0; i < 3; i++) health.runRound(); // `busy` takes nothing now: unhealthy, but no longer reported
    expect(health.status('live').unhealthy).toContain('busy');
    expect(valueOf(await points(reader, 'lifeline.health.status'), { 'lifeline.health.component': 'busy' })).not.toBe(0);
  });

  it('reports at most maxComponents one by one; the components gauge still counts them all', async () => {
    const reader = new OnDemandReader();
    const health = new HealthCatalog({ interval: 60_000 });
    catalogs.push(health);
    for (const name of ['a', 'b', 'c']) health.registerLiveness(name);
    const installed = installHealthMetrics(health, { meterProvider: new MeterProvider({ readers: [reader] }), maxComponents: 2 });
    expect((await points(reader, 'lifeline.health.status')).map((p) => p.attributes['lifeline.health.component'])).toEqual(['a', 'b']);
    expect(valueOf(await points(reader, 'lifeline.health.components'), { 'lifeline.health.state': 'unhealthy' })).toBe(3);
    installed.uninstall();
  });

  it('refuses a bad maxComponents with a clear error', () => {
    expect(() => installHealthMetrics(new HealthCatalog(), { maxComponents: -1 })).toThrow(/maxComponents/);
  });
});

describe('deadline metrics (DeadlineMetricsSpanProcessor)', () => {
  const reader = new OnDemandReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  // Head sampling at 0: every trace dropped, and the counts must stay whole all the same.
  const tracing = instrumentedUndici(
    [new DeadlineSpanProcessor(), new DeadlineMetricsSpanProcessor({ meterProvider, maxServerAddresses: 1 })],
    {},
    undefined,
    {
      sampler: new EvidenceSampler(new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0) })),
    },
  );
  let installed: InstalledDeadlineDispatcher;
  let silent: TestServer;
  let ok: TestServer;
  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    tracing.start();
    installed = installDeadlineDispatcher();
    silent = await serve(neverAnswers);
    ok = await serve(answersOk);
  });
  afterAll(async () => {
    tracing.stop();
    installed.uninstall();
    await silent.close();
    await ok.close();
  });

  it("does not count a verdict's snapshot of work in flight: the real span counts when it ends", async () => {
    const snapshotReader = new OnDemandReader();
    const processor = new DeadlineMetricsSpanProcessor({ meterProvider: new MeterProvider({ readers: [snapshotReader] }) });
    const tracer = new TracerProvider({ spanProcessors: [processor] }).getTracer('test');
    tracer
      .startSpan('GET (in flight, past deadline)', { attributes: { 'lifeline.in_flight': true, 'lifeline.deadline.exceeded': true } })
      .end();
    tracer.startSpan('GET', { attributes: { 'lifeline.deadline.exceeded': true, 'lifeline.deadline.source': 'tick' } }).end();
    const counted = await points(snapshotReader, 'lifeline.deadline.exceeded');
    expect(counted.map((p) => p.value)).toEqual([1]);
  });

  it('counts calls a deadline ended, by address and source, and calls nothing bounded, though no trace was sampled', async () => {
    for (let i = 0; i < 2; i++) await withTimeout(50, () => fetch(`${silent.url}/slow`)).catch(() => undefined);
    await (await fetch(`${ok.url}/unbounded`)).text();
    await (await fetch(`http://localhost:${String(ok.port)}/another-address`)).text();
    const exceeded = await points(reader, 'lifeline.deadline.exceeded');
    expect(valueOf(exceeded, { 'server.address': '127.0.0.1', 'lifeline.deadline.source': 'scope' })).toBe(2);
    const missing = await points(reader, 'lifeline.deadline.missing');
    expect(valueOf(missing, { 'server.address': '127.0.0.1' })).toBe(1);
    // Past maxServerAddresses (1 here), further addresses are counted together.
    expect(valueOf(missing, { 'server.address': '_OTHER' })).toBe(1);
    expect(tracing.exporter.getFinishedSpans()).toEqual([]); // nothing was sampled
  });
});
