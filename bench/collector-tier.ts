/**
 * bench/collector-tier: what the collector tier of otel-collector/ costs and keeps. An in-process
 * load generator (the OpenTelemetry SDK, OTLP/HTTP) sends traces of 4 spans to the agent, which
 * routes them by trace ID to two gateways (tail sampling: evidence kept, ROUTINE_PERCENT of the
 * rest) in front of Jaeger on Badger. 5 % of the traces carry an ERROR (evidence). For each rate:
 * CPU of the agent, the gateways and Jaeger (from /proc) per 1,000 spans/s, and traces kept vs
 * sent (and whole). Client spans carry the attributes a real call has (~0.55 KB each in OTLP). Everything shares the machine's 2 cores with the generator.
 * Run: npm run bench:collector-tier (builds Jaeger and the collector on first use)
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCollectorTier } from '../otel-collector/local-stack.mjs';
import { fixed, table, target } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const RATES = [1_000, 3_000]; // spans per second
const SECONDS = quick ? 6 : 15;
const ROUTINE_PERCENT = 1;
const DECISION_WAIT_S = 2;
const ERROR_SHARE = 0.05;
/** A client call's attributes as the undici instrumentation and lifeline set them (~0.55 KB a span in OTLP). */
const CALL_ATTRIBUTES = {
  'http.request.method': 'GET',
  'url.full': 'http://inventory.internal:8080/v1/items?page=2',
  'url.path': '/v1/items',
  'url.query': 'page=2',
  'url.scheme': 'http',
  'server.address': 'inventory.internal',
  'server.port': 8080,
  'user_agent.original': 'node',
  'network.peer.address': '10.0.3.17',
  'network.peer.port': 8080,
  'http.response.status_code': 200,
  'lifeline.deadline.at': '2026-12-01T10:00:30.000Z',
  'lifeline.deadline.budget_ms': 29_950,
  'lifeline.deadline.source': 'tick',
};

/** utime + stime of a process so far, in ms (USER_HZ 100). */
function cpuMs(pid: number | undefined): number {
  const fields = readFileSync(`/proc/${String(pid)}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const badgerDir = mkdtempSync(join(tmpdir(), 'lifeline-bench-badger-'));
const tier = await startCollectorTier({
  base: 32_000 + (process.pid % 70) * 10,
  badgerDir,
  decisionWait: `${String(DECISION_WAIT_S)}s`,
  routinePercent: ROUTINE_PERCENT,
});
const rows: string[][] = [];
let perThousand = Number.NaN;
try {
  for (const rate of RATES) {
    const service = `collector-bench-${String(rate)}`;
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': service }),
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: new OTLPTraceExporter({ url: `${tier.otlpHttpEndpoint}/v1/traces` }),
          maxQueueSize: 1 << 15,
          maxExportBatchSize: 512,
          scheduledDelayMillis: 200,
        }),
      ],
    });
    const tracer = provider.getTracer('bench');
    const processes = [tier.agent, ...tier.gateways, tier.jaeger];
    const before = processes.map((p) => cpuMs(p.child.pid));
    const started = performance.now();
    let traces = 0;
    let errors = 0;
    // Every 10 ms, the traces (4 spans each) that keep the rate.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.floor(((performance.now() - started) / 1_000) * (rate / 4)) - traces;
        for (let i = 0; i < due; i++) {
          const failing = Math.random() < ERROR_SHARE;
          const root = tracer.startSpan('GET /orders/:id');
          const parent = trace.setSpan(ROOT_CONTEXT, root); // no context manager here: the parent is passed
          for (let call = 0; call < 3; call++) {
            const span = tracer.startSpan('GET', { kind: SpanKind.CLIENT, attributes: CALL_ATTRIBUTES }, parent);
            if (failing && call === 2) span.setStatus({ code: SpanStatusCode.ERROR });
            span.end();
          }
          root.end();
          traces++;
          if (failing) errors++;
        }
        if (performance.now() - started >= SECONDS * 1_000) {
          clearInterval(timer);
          resolve();
        }
      }, 10);
    });
    await provider.forceFlush();
    // Decided and stored: the decision wait, the gateways' and Jaeger's batches.
    await new Promise((resolve) => setTimeout(resolve, (DECISION_WAIT_S + 3) * 1_000));
    const used = processes.map((p, i) => cpuMs(p.child.pid) - (before[i] ?? 0));
    const params = new URLSearchParams({
      service,
      limit: '100000',
      start: String((Date.now() - 3_600_000) * 1_000),
      end: String(Date.now() * 1_000),
    });
    const found =
      ((await (await fetch(`${tier.queryUrl}/api/traces?${params.toString()}`)).json()) as { data: { spans: unknown[] }[] | null }).data ??
      [];
    const kept = found.length;
    const whole = found.filter((t) => t.spans.length === 4).length;
    const spansPerS = (traces * 4) / SECONDS;
    // CPU seconds per 1,000 spans sent, all their work included (the drain after sending too):
    // the same number as the share of one core that 1,000 spans/s keep busy.
    const share = (ms: number): number => ms / 1_000 / ((traces * 4) / 1_000);
    const agent = used[0] ?? 0;
    const gateways = (used[1] ?? 0) + (used[2] ?? 0);
    const jaeger = used[3] ?? 0;
    if (rate === RATES[RATES.length - 1]) perThousand = share(agent + gateways);
    const expected = errors + (traces - errors) * (ROUTINE_PERCENT / 100);
    rows.push([
      fixed(spansPerS, 0),
      `${fixed(share(agent) * 100, 1)} %`,
      `${fixed(share(gateways) * 100, 1)} %`,
      `${fixed(share(jaeger) * 100, 1)} %`,
      `${String(kept)} of ${String(traces)} (${String(errors)} with an ERROR; expected ~${fixed(expected, 0)}); ${String(whole)} whole`,
    ]);
    await provider.shutdown();
  }
} finally {
  await tier.stop();
  rmSync(badgerDir, { recursive: true, force: true });
}
console.log(
  `## The collector tier: agent -> 2 gateways (tail sampling, ${String(ROUTINE_PERCENT)} % routine) -> Jaeger on Badger, ${String(SECONDS)} s per rate, traces of 4 spans, ${String(ERROR_SHARE * 100)} % with an ERROR\n`,
);
table(['spans/s sent', 'agent CPU per 1k spans/s (% of a core)', 'both gateways', 'Jaeger (Badger)', 'traces kept'], rows);
target({
  figure: 'collector tier (agent + gateways) CPU per 1,000 spans/s, % of a core',
  measured: fixed(perThousand * 100, 1),
  target: '—',
  met: undefined,
  note: 'CPU-bound: generator and tier share 2 cores',
});
process.exit(0);
