/**
 * bench/diagnostics: what in-flight tracking costs per span (captureStacks off / ticks / all, as a
 * ratio to no tracking), and the time and size of a verdict with 1,000 and 10,000 in-flight spans.
 * Run: npm run bench:diagnostics
 */
import { context, SpanKind, trace, type Tracer } from '@opentelemetry/api';
import { TracerProvider, type ReadableSpan, type SpanExporter, type SpanProcessor, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { DeadlineSpanProcessor, Diagnostics, HealthCatalog, InFlightSpanProcessor, withTimeout, type CaptureStacks } from 'otel-lifeline';
import { fixed, spread, summarize, table, target } from './support.ts';

const SPANS = 50_000;
const ROUNDS = 7;

/** Starts and ends `SPANS` child spans inside a tick trace (so `ticks` mode captures them). */
function spanCost(tracer: Tracer): number {
  const tick = tracer.startSpan('tick bench', { root: true, attributes: { 'lifeline.health.component': 'bench' } });
  const ctx = trace.setSpan(context.active(), tick);
  const started = process.hrtime.bigint();
  for (let i = 0; i < SPANS; i++)
    tracer
      .startSpan('GET', { kind: SpanKind.CLIENT, attributes: { 'url.full': `http://h/x?page=${i}`, 'http.request.method': 'GET' } }, ctx)
      .end();
  const ns = Number(process.hrtime.bigint() - started) / SPANS;
  tick.end();
  return ns;
}

const setups: [string, () => SpanProcessor[]][] = [
  ['no tracking (baseline)', () => []],
  ...(['off', 'ticks', 'all'] as CaptureStacks[]).map((mode): [string, () => SpanProcessor[]] => [
    `InFlightSpanProcessor, captureStacks '${mode}'`,
    () => [new InFlightSpanProcessor({ captureStacks: mode })],
  ]),
];
const tracers = setups.map(
  ([name, processors]) => [name, new TracerProvider({ spanProcessors: processors() }).getTracer('bench')] as const,
);
for (const [, tracer] of tracers) spanCost(tracer); // warm up
const costs = new Map<string, number[]>(tracers.map(([name]) => [name, []]));
for (let round = 0; round < ROUNDS; round++) for (const [name, tracer] of tracers) costs.get(name)?.push(spanCost(tracer));
const baseline = summarize(costs.get(setups[0]?.[0] ?? '') ?? []).median;
console.log(
  `## Per-span cost of in-flight tracking: start + end of a child span in a tick trace, median of ${ROUNDS} × ${SPANS.toLocaleString('en-US')}\n`,
);
table(
  ['setup', 'ns / span', 'ratio to no tracking'],
  tracers.map(([name]) => {
    const median = summarize(costs.get(name) ?? []).median;
    return [name, fixed(median, 0), fixed(median / baseline, 2)];
  }),
);
const ticks = summarize(costs.get(setups[2]?.[0] ?? '') ?? []);
target({
  figure: "in-flight tracking per span, creation stacks 'ticks' (µs per span; ratio to no tracking)",
  measured: `${spread({ median: ticks.median / 1_000, min: ticks.min / 1_000, max: ticks.max / 1_000 }, 1)}; ${fixed(ticks.median / baseline, 2)}×`,
  target: '—',
  met: undefined,
  note: 'the stack is captured and formatted when a span of tick work starts',
});

class CountingExporter implements SpanExporter {
  spans: ReadableSpan[] = [];
  export(spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    this.spans.push(...spans);
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const MAX_BYTES = 16_384;
const rows: string[][] = [];
let verdictAt10k = { median: Number.NaN, min: Number.NaN, max: Number.NaN };
for (const inFlightCount of [1_000, 10_000]) {
  const times: number[] = [];
  let sizes = { tree: 0, stacks: 0, truncated: false, snapshotSpans: 0 };
  for (let round = 0; round < 5; round++) {
    const exporter = new CountingExporter();
    const inFlight = new InFlightSpanProcessor();
    const provider = new TracerProvider({ spanProcessors: [inFlight, new SimpleSpanProcessor({ exporter })] });
    const health = new HealthCatalog({
      interval: 3_600_000,
      tracerProvider: provider,
      diagnostics: {
        inFlight,
        tracerProvider: provider,
        maxBytes: MAX_BYTES,
        logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
      },
    });
    const h = health.registerLiveness('stuck');
    h.take();
    const tracer = provider.getTracer('bench');
    // The component's work: `inFlightCount` calls started under its tick, none of which end.
    h.take()?.run(() => {
      for (let i = 0; i < inFlightCount; i++)
        tracer.startSpan('GET', {
          kind: SpanKind.CLIENT,
          attributes: { 'url.full': `http://upstream/items/${i}?token=t`, 'http.request.method': 'GET' },
        });
    });
    health.runRound();
    health.runRound();
    const started = process.hrtime.bigint();
    health.runRound(); // healthy -> unhealthy: builds, caps and exports the diagnostic
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
    const verdict = exporter.spans.find((s) => s.name.startsWith('health verdict'));
    const event = verdict?.events.find((e) => e.name === 'lifeline.diagnostic');
    sizes = {
      tree: Buffer.byteLength(String(event?.attributes?.['lifeline.diagnostic.span_tree'])),
      stacks: Buffer.byteLength(String(event?.attributes?.['lifeline.diagnostic.stacks'])),
      truncated: event?.attributes?.['lifeline.diagnostic.truncated'] === true,
      snapshotSpans: exporter.spans.filter((s) => s.attributes['lifeline.in_flight'] === true).length,
    };
    health.close();
  }
  const t = summarize(times);
  if (inFlightCount === 10_000) verdictAt10k = t;
  rows.push([
    inFlightCount.toLocaleString('en-US'),
    fixed(t.median, 1),
    `${fixed(t.min, 1)}–${fixed(t.max, 1)}`,
    String(sizes.tree),
    String(sizes.stacks),
    String(sizes.truncated),
    String(sizes.snapshotSpans),
  ]);
}
console.log(
  `## One verdict (snapshot + capped attributes + snapshot spans + log) with N in-flight spans in the stuck trace, median of 5; cap ${MAX_BYTES} bytes\n`,
);
table(['in-flight spans', 'ms (median)', 'min–max ms', 'span_tree bytes', 'stacks bytes', 'truncated', 'snapshot spans exported'], rows);
target({
  figure: 'one verdict with 10,000 spans in flight (ms)',
  measured: spread(verdictAt10k, 1),
  target: '≤ 30',
  met: verdictAt10k.median <= 30,
});

// Stuck work with no verdict (Diagnostics.exportStuck, every catalog interval): one pass over
// the tracked spans. Steady state: 10,000 requests in flight, young, half under a deadline (read from
// the context at their start, not parsed each round). Storm: 10,000 stuck; its first round exports the capped trees and a
// summary, the rounds after it only scan.
const STUCK_SPANS = 10_000;
function stuckRounds(agoMs: number): { first: number; later: number[] } {
  const exporter = new CountingExporter();
  const inFlight = new InFlightSpanProcessor();
  const provider = new TracerProvider({ spanProcessors: [inFlight, new DeadlineSpanProcessor(), new SimpleSpanProcessor({ exporter })] });
  const diagnostics = new Diagnostics({
    inFlight,
    tracerProvider: provider,
    logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
  });
  const tracer = provider.getTracer('bench');
  const now = Date.now();
  for (let i = 0; i < STUCK_SPANS; i++) {
    const start = (): unknown =>
      tracer.startSpan(`GET /orders/${String(i % 50)}`, {
        kind: SpanKind.SERVER,
        startTime: now - agoMs,
        attributes: { 'http.request.method': 'GET', 'http.route': `/orders/${String(i % 50)}` },
      });
    if (i % 2 === 0) withTimeout(60_000, start);
    else start();
  }
  const time = (): number => {
    const started = process.hrtime.bigint();
    diagnostics.exportStuck(now);
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  // The 10,000 spans just made leave garbage that the next allocation pays for: not the round's cost.
  (globalThis as { gc?: () => void }).gc?.();
  const first = time();
  const later = Array.from({ length: 9 }, time);
  diagnostics.close();
  return { first, later };
}
const steady = summarize(Array.from({ length: 5 }, () => stuckRounds(1_000)).flatMap((r) => [r.first, ...r.later]));
// Each storm's first round is one sample: 15 of them, for a median the VM's noise does not move by 2×.
const storms = Array.from({ length: 15 }, () => stuckRounds(120_000));
const stormFirst = summarize(storms.map((r) => r.first));
const stormLater = summarize(storms.flatMap((r) => r.later));
console.log(`## A stuck-work round (no verdict) with ${STUCK_SPANS.toLocaleString('en-US')} spans in flight, ms\n`);
table(
  ['case', 'ms (median)', 'min–max ms'],
  [
    ['none stuck (young requests, half under a deadline)', fixed(steady.median, 2), `${fixed(steady.min, 2)}–${fixed(steady.max, 2)}`],
    [
      'a storm: all stuck, its first round (capped trees + summary)',
      fixed(stormFirst.median, 2),
      `${fixed(stormFirst.min, 2)}–${fixed(stormFirst.max, 2)}`,
    ],
    ['a storm: the rounds after (only the scan)', fixed(stormLater.median, 2), `${fixed(stormLater.min, 2)}–${fixed(stormLater.max, 2)}`],
  ],
);
target({
  figure: `a stuck-work round with ${STUCK_SPANS.toLocaleString('en-US')} spans in flight, none stuck (ms)`,
  measured: spread(steady, 2),
  target: '≤ 5',
  met: steady.median <= 5,
});
target({
  figure: `a stuck-work round with ${STUCK_SPANS.toLocaleString('en-US')} stuck requests, the rounds after the first (ms)`,
  measured: spread(stormLater, 2),
  target: '≤ 5',
  met: stormLater.median <= 5,
});
target({
  figure: `the first stuck-work round of a storm of ${STUCK_SPANS.toLocaleString('en-US')} (ms): 10 trees and a summary exported, every route counted`,
  measured: spread(stormFirst, 2),
  target: '≤ 5',
  met: stormFirst.median <= 5,
});
