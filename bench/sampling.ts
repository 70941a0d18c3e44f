/**
 * bench/sampling: what keeping the evidence costs under head sampling. The same traced request (a
 * server span and three client spans with the usual attributes, lifeline's processors, a batch
 * processor) on three providers: OTEL_TRACES_SAMPLER=parentbased_traceidratio at 1 % as the SDK
 * has it (dropped spans are not recorded), the same wrapped by lifeline (EvidenceSampler +
 * EvidenceSpanProcessor: dropped spans are recorded and held until evicted), and every trace
 * sampled. Rounds alternate ABC·CBA; µs of CPU per request, median of rounds.
 * Run: npm run bench:sampling
 */
import { SpanKind, type Tracer } from '@opentelemetry/api';
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { DeadlineSpanProcessor, InFlightSpanProcessor } from 'otel-lifeline';
import { RedactionSpanProcessor } from 'otel-lifeline/sdk';
import { EvidenceSampler, EvidenceSpanProcessor } from 'otel-lifeline/sdk';
import { DiscardExporter, fixed, settledHeap, spread, summarize, table, target } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const ROUNDS = quick ? 6 : 15;
const REQUESTS = quick ? 5_000 : 20_000;

const ratio = (): Sampler => new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.01) });
const batch = (): SpanProcessor =>
  new BatchSpanProcessor({ exporter: new DiscardExporter(), maxQueueSize: 1 << 16, maxExportBatchSize: 4_096 });
const lifelines = (): SpanProcessor[] => [new InFlightSpanProcessor(), new DeadlineSpanProcessor(), new RedactionSpanProcessor()];

const variants: { name: string; tracer: Tracer }[] = [
  {
    name: 'parentbased_traceidratio 1 %, as the SDK has it',
    tracer: new TracerProvider({ sampler: ratio(), spanProcessors: [...lifelines(), batch()] }).getTracer('bench'),
  },
  {
    name: 'the same, keeping the evidence (EvidenceSampler + EvidenceSpanProcessor)',
    tracer: new TracerProvider({
      sampler: new EvidenceSampler(ratio()),
      spanProcessors: [...lifelines(), new EvidenceSpanProcessor([batch()])],
    }).getTracer('bench'),
  },
  {
    name: 'every trace sampled (parentbased_always_on)',
    tracer: new TracerProvider({ spanProcessors: [...lifelines(), batch()] }).getTracer('bench'),
  },
];

/** One request: a server span and three client calls under it, attributes as the http and undici instrumentations set them. */
function request(tracer: Tracer, i: number): void {
  tracer.startActiveSpan(
    'GET /orders/:id',
    {
      kind: SpanKind.SERVER,
      attributes: { 'http.request.method': 'GET', 'url.path': `/orders/${String(i)}`, 'http.route': '/orders/:id', 'server.port': 8080 },
    },
    (server) => {
      for (let call = 0; call < 3; call++) {
        const client = tracer.startSpan('GET', {
          kind: SpanKind.CLIENT,
          attributes: {
            'http.request.method': 'GET',
            'url.full': `http://inventory.internal:8080/items/${String(i)}?page=${String(call)}`,
            'server.address': 'inventory.internal',
            'server.port': 8080,
          },
        });
        client.setAttribute('http.response.status_code', 200);
        client.end();
      }
      server.setAttribute('http.response.status_code', 200);
      server.end();
    },
  );
}

const cpuPerRequest = new Map<string, number[]>(variants.map((v) => [v.name, []]));
for (let round = 0; round <= ROUNDS; round++) {
  for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
    const cpu = process.cpuUsage();
    for (let i = 0; i < REQUESTS; i++) request(variant.tracer, i);
    const used = process.cpuUsage(cpu);
    if (round > 0) cpuPerRequest.get(variant.name)?.push((used.user + used.system) / REQUESTS); // round 0 warms up
  }
}
const heap: number[] = [];
for (const variant of variants) {
  const before = await settledHeap();
  for (let i = 0; i < REQUESTS; i++) request(variant.tracer, i);
  heap.push((await settledHeap()) - before);
}

console.log(
  `## Head sampling at 1 %: CPU per request (a server span + 3 client spans), ${String(ROUNDS)} rounds × ${REQUESTS.toLocaleString('en-US')} requests\n`,
);
table(
  ['variant', 'CPU µs per request, median (min–max)', '÷ plain ratio sampling', 'heap growth over a round (MB)'],
  variants.map((v, i) => {
    const own = summarize(cpuPerRequest.get(v.name) ?? []);
    const base = summarize(cpuPerRequest.get(variants[0]?.name ?? '') ?? []);
    return [v.name, spread(own, 1), fixed(own.median / base.median, 2), fixed((heap[i] ?? Number.NaN) / 2 ** 20, 2)];
  }),
);
const evidence = summarize(cpuPerRequest.get(variants[1]?.name ?? '') ?? []);
const all = summarize(cpuPerRequest.get(variants[2]?.name ?? '') ?? []);
target({
  figure: 'keeping the evidence at 1 % head sampling ÷ sampling every trace (CPU per request)',
  measured: `${fixed(evidence.median / all.median, 2)} (${fixed(evidence.median, 1)} vs ${fixed(all.median, 1)} µs)`,
  target: '—',
  met: undefined,
  note: 'what a recorded-but-dropped span costs: everything but the export',
});
process.exit(0);
