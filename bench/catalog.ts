/**
 * bench/catalog: the cost of one ping round at 1k / 10k / 100k components, against the least a
 * round could do (iterate a Map and allocate one buffered tick per component), and the cost of
 * taking and running a tick with spans on (real SDK, batch processor) vs the no-op tracer.
 * Run: npm run bench:catalog
 */
import { BatchSpanProcessor, TracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace';
import { HealthCatalog, type ComponentHandle } from 'otel-lifeline';
import { fixed, table, timeRuns } from './support.ts';

const SIZES = [1_000, 10_000, 100_000];

function roundCost(size: number): { round: ReturnType<typeof timeRuns>; baseline: ReturnType<typeof timeRuns> } {
  const health = new HealthCatalog({ interval: 3_600_000 });
  const handles: ComponentHandle[] = [];
  for (let i = 0; i < size; i++) handles.push(health.registerLiveness(`component-${i}`));
  // Every component keeps up, so each round enqueues one tick per component (the common, costlier path).
  const drain = (): void => {
    for (const h of handles) while (h.take() !== undefined);
  };
  const runs = size >= 100_000 ? 15 : 40;
  const round = timeRuns(
    () => {
      health.runRound();
    },
    runs,
    { prepare: drain },
  );
  health.close();

  const baselineMap = new Map<string, { buffer: { issuedAt: number; deadline: number }[] }>();
  for (let i = 0; i < size; i++) baselineMap.set(`component-${i}`, { buffer: [] });
  const baseline = timeRuns(
    () => {
      const now = Date.now();
      for (const c of baselineMap.values()) {
        if (c.buffer.length < 2) c.buffer.push({ issuedAt: now, deadline: now + 1 });
      }
    },
    runs,
    {
      prepare: () => {
        for (const c of baselineMap.values()) c.buffer.length = 0;
      },
    },
  );
  return { round, baseline };
}

const roundRows: string[][] = [];
let perComponent1k = 0;
for (const size of SIZES) {
  const { round, baseline } = roundCost(size);
  const perComponentNs = (round.median * 1e6) / size;
  if (size === SIZES[0]) perComponent1k = perComponentNs;
  roundRows.push([
    size.toLocaleString('en-US'),
    fixed(round.median),
    `${fixed(round.min)}–${fixed(round.max)}`,
    fixed(perComponentNs, 1),
    fixed(perComponentNs / perComponent1k, 2),
    fixed(baseline.median),
    fixed(round.median / baseline.median, 2),
  ]);
}
console.log('## check() round cost (each component keeps up: one tick enqueued per component)\n');
table(
  ['components', 'round median ms', 'min–max ms', 'ns / component', 'ns/component ÷ at 1k (1 = linear)', 'baseline ms', 'round ÷ baseline'],
  roundRows,
);

class DiscardExporter implements SpanExporter {
  export(_spans: ReadableSpan[], done: (result: { code: 0 }) => void): void {
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function tickCost(health: HealthCatalog, count: number): number {
  const h = health.registerLiveness('taker');
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i++) {
    health.runRound();
    h.take()?.run(() => i);
  }
  const ns = Number(process.hrtime.bigint() - started) / count;
  h.deregister();
  return ns;
}

const TICKS = 100_000;
const provider = new TracerProvider({
  spanProcessors: [new BatchSpanProcessor({ exporter: new DiscardExporter(), maxQueueSize: 100_000 })],
});
const noSpans = new HealthCatalog({ interval: 3_600_000 });
const withSpans = new HealthCatalog({ interval: 3_600_000, tracerProvider: provider });
tickCost(noSpans, 10_000); // warm up both paths
tickCost(withSpans, 10_000);
const offRuns: number[] = [];
const onRuns: number[] = [];
for (let i = 0; i < 5; i++) {
  offRuns.push(tickCost(noSpans, TICKS));
  onRuns.push(tickCost(withSpans, TICKS));
}
offRuns.sort((a, b) => a - b);
onRuns.sort((a, b) => a - b);
const off = offRuns[2] ?? Number.NaN;
const on = onRuns[2] ?? Number.NaN;
console.log(`## Taking and running one tick (round + take + run), median of 5 × ${TICKS.toLocaleString('en-US')}\n`);
table(
  ['spans', 'ns / tick', 'ratio to no-op tracer'],
  [
    ['no-op tracer (baseline)', fixed(off, 0), '1.00'],
    ['SDK tracer, batch processor', fixed(on, 0), fixed(on / off, 2)],
  ],
);
noSpans.close();
withSpans.close();
await provider.shutdown();
