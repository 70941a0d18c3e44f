/**
 * bench/http-clients: what lifeline's node:http deadlines cost and how exact they are.
 * 1. Abort lateness (rejection time − deadline) of node:http calls to a peer that never answers.
 * 2. Keep-alive throughput of node:http and axios: lifeline (node:http deadlines + span processor +
 *    propagator, every call under an active deadline) ÷ the same OTel-instrumented client without
 *    lifeline. Rounds alternate ABBA so machine noise hits both alike; the ratio is per round.
 * Run: npm run bench:http  (the peers run in their own processes)
 */
import { propagation } from '@opentelemetry/api';
import { CompositePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { DeadlinePropagator, DeadlineSpanProcessor, installHttpDeadlines, withTimeout, type Installed } from 'otel-lifeline';
import { createRequire } from 'node:module';
import { abortLateness, DiscardExporter, fixed, percentile, runConcurrently, startPeer, summarize, table } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const LATENESS_CALLS = 1_000;
const THROUGHPUT_CALLS = quick ? 3_000 : 6_000;
const THROUGHPUT_ROUNDS = quick ? 6 : 12;

const batch = () => new BatchSpanProcessor({ exporter: new DiscardExporter(), maxQueueSize: 1 << 16, maxExportBatchSize: 4_096 });
const plainProvider = new TracerProvider({ spanProcessors: [batch()] });
const provider = new TracerProvider({ spanProcessors: [new DeadlineSpanProcessor(), batch()] });
const instrumentation = new HttpInstrumentation();
instrumentation.setTracerProvider(provider);
instrumentation.enable();
// Required after the instrumentation is on, as a CommonJS service under register mode does.
const require = createRequire(import.meta.url);
const http = require('node:http') as typeof import('node:http');
const axios = (require('axios') as { default: typeof import('axios').default }).default;

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
const nodeHttp = (url: string): Promise<void> =>
  new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on('end', resolve);
        res.on('error', reject);
      })
      .on('error', reject);
  });
const viaAxios = async (url: string): Promise<void> => {
  await axios.get(url, { httpAgent: agent, responseType: 'text' });
};

let deadlines: Installed | undefined;
function useLifeline(on: boolean): void {
  deadlines?.uninstall();
  deadlines = on ? installHttpDeadlines() : undefined;
  instrumentation.setTracerProvider(on ? provider : plainProvider);
  propagation.disable();
  propagation.setGlobalPropagator(
    on
      ? new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new DeadlinePropagator()] })
      : new W3CTraceContextPropagator(),
  );
}

// --- 1. Abort lateness.
useLifeline(true);
const silent = await startPeer('silent');
const latenessMs = (calls: number, concurrency: number, budget: () => number) =>
  abortLateness(calls, concurrency, budget, (i) => nodeHttp(`${silent.url}/${String(i)}`));
await latenessMs(100, 10, () => 20); // warm up
const cases: [string, number[], string][] = [
  ['10 in flight, deadlines spread over 20–50 ms', await latenessMs(LATENESS_CALLS, 10, () => 20 + Math.random() * 30), 'p99 ≤ 5 ms'],
  ['1,000 in flight, one shared deadline (thundering herd)', await latenessMs(LATENESS_CALLS, LATENESS_CALLS, () => 300), '—'],
];
silent.stop();
console.log(
  `## 1. Abort lateness: rejection − deadline, ${LATENESS_CALLS.toLocaleString('en-US')} node:http calls to a peer that never answers, OTel on (ms)\n`,
);
table(
  ['case', 'p50', 'p99', 'max', 'target'],
  cases.map(([name, late, target]) => [
    name,
    fixed(percentile(late, 0.5), 1),
    fixed(percentile(late, 0.99), 1),
    fixed(percentile(late, 1), 1),
    target,
  ]),
);

// --- 2. Throughput, per client: lifeline ÷ OTel alone, ABBA within each round.
const peer = await startPeer('ok');
const rows: string[][] = [];
for (const [client, call] of [
  ['node:http', nodeHttp],
  ['axios', viaAxios],
] as const) {
  const variants = [
    { name: 'OTel-instrumented, no lifeline', on: false, call: (url: string) => call(url) },
    {
      name: 'OTel + lifeline deadlines, every call under a deadline',
      on: true,
      call: (url: string) => withTimeout(30_000, () => call(url)),
    },
  ];
  const rates = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const cpu = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const ratios: number[] = [];
  for (let round = 0; round < THROUGHPUT_ROUNDS + 1; round++) {
    const roundRates = new Map<string, number>();
    for (const variant of [...variants, ...[...variants].reverse()]) {
      useLifeline(variant.on);
      const started = performance.now();
      const used = process.cpuUsage();
      await runConcurrently(THROUGHPUT_CALLS / 2, 16, (i) => variant.call(`${peer.url}/${String(i)}`));
      const usage = process.cpuUsage(used);
      roundRates.set(
        variant.name,
        (roundRates.get(variant.name) ?? 0) + THROUGHPUT_CALLS / 2 / ((performance.now() - started) / 1_000) / 2,
      );
      if (round > 0) cpu.get(variant.name)?.push((usage.user + usage.system) / (THROUGHPUT_CALLS / 2));
    }
    if (round === 0) continue; // warm-up round
    for (const variant of variants) rates.get(variant.name)?.push(roundRates.get(variant.name) ?? Number.NaN);
    ratios.push((roundRates.get(variants[1]?.name ?? '') ?? Number.NaN) / (roundRates.get(variants[0]?.name ?? '') ?? Number.NaN));
  }
  const ratio = summarize(ratios);
  for (const variant of variants) {
    const wall = summarize(rates.get(variant.name) ?? []);
    rows.push([
      client,
      variant.name,
      `${fixed(wall.median, 0)} (${fixed(wall.min, 0)}–${fixed(wall.max, 0)})`,
      variant.on ? `${fixed(ratio.median, 3)} (${fixed(ratio.min, 3)}–${fixed(ratio.max, 3)})` : '1.000',
      fixed(summarize(cpu.get(variant.name) ?? []).median, 1),
    ]);
  }
}
peer.stop();
console.log(
  `## 2. Keep-alive throughput, 16 in flight, ${String(THROUGHPUT_ROUNDS)} rounds × ${THROUGHPUT_CALLS.toLocaleString('en-US')} calls per variant (ABBA within a round)\n`,
);
table(
  [
    'client',
    'variant',
    'req/s median (min–max)',
    '÷ OTel-only: median of per-round ratios (min–max), target ≥ 0.95',
    'client CPU µs / call (median)',
  ],
  rows,
);
deadlines?.uninstall();
agent.destroy();
await Promise.all([provider.shutdown(), plainProvider.shutdown()]);
process.exit(0);
