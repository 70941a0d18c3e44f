/**
 * bench/drivers: what deadlines on database and cache calls cost, against real servers on loopback.
 * 1. Throughput: pg `pool.query('SELECT $1')` and ioredis `GET`, through OpenTelemetry's
 *    instrumentation of each driver, made as a service makes them: requests of 4 calls in sequence
 *    under a request span (so the instrumentation records a client span per call), 16 requests in
 *    flight. Variants: the instrumented driver without lifeline; with lifeline's driver deadlines and
 *    each request's calls under the request's deadline (as an inbound or tick deadline bounds them):
 *    the target; the request's deadline in the context without driver deadlines (what the
 *    deadline's span attributes cost alone); and with every call under a deadline of its own
 *    (`withTimeout` per call), for what a scope per call adds. Rounds alternate ABCD DCBA; ratios are taken within a round.
 * 2. Abort lateness (rejection − deadline) of calls the server never answers in time: pg
 *    `pg_sleep(5)` and Redis `BLPOP … 0`, 10 in flight, deadlines spread over 20–50 ms.
 * The servers run on a CPU of their own (`pinApart`). Run: npm run bench:drivers (PostgreSQL and
 * Redis from Debian's packages, started in throwaway directories)
 */
import { trace } from '@opentelemetry/api';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { DeadlineSpanProcessor, installDriverDeadlines, withTimeout } from 'otel-lifeline';
import { startPostgres, startRedis } from '../test/support/databases.ts';
import {
  abortLateness,
  DiscardExporter,
  fixed,
  percentile,
  pgPoolConfig,
  pinApart,
  runConcurrently,
  spread,
  stallsDuring,
  summarize,
  table,
  target,
} from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const CALLS = quick ? 4_000 : 12_000;
const ROUNDS = quick ? 6 : 12;
const LATENESS_CALLS = quick ? 200 : 500;
/** Calls per request, made one after another. */
const PER_REQUEST = 4;
/** The request's deadline: long enough that no call in the benchmark reaches it. */
const REQUEST_DEADLINE_MS = 30_000;

const provider = new TracerProvider({
  spanProcessors: [
    new DeadlineSpanProcessor(),
    new BatchSpanProcessor({ exporter: new DiscardExporter(), maxQueueSize: 1 << 16, maxExportBatchSize: 4_096 }),
  ],
});
trace.setGlobalTracerProvider(provider);
const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
const { context } = await import('@opentelemetry/api');
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const instrumentations = [new PgInstrumentation(), new IORedisInstrumentation()];
for (const instrumentation of instrumentations) {
  instrumentation.setTracerProvider(provider);
  instrumentation.enable();
}
const tracer = provider.getTracer('bench');
const require = createRequire(import.meta.url);
const pg = require('pg') as typeof import('pg');
const { Redis } = require('ioredis') as typeof import('ioredis');

const postgres = await startPostgres();
const redis = await startRedis();
console.log(`Pinned: ${pinApart([postgres.pid, redis.pid])}.\n`);
const pool = new pg.Pool(pgPoolConfig(postgres, 8));
const client = new Redis({ host: redis.host, port: redis.port, lazyConnect: true });
await client.connect();
await client.set('bench', 'x');

interface Driver {
  name: string;
  call: (i: number) => Promise<unknown>;
}
const drivers: Driver[] = [
  { name: 'pg pool.query', call: (i) => pool.query('SELECT $1::int AS n', [i]) },
  { name: 'ioredis GET', call: () => client.get('bench') },
];

let installed: { uninstall(): void } | undefined;
const withoutLifeline = () => {
  installed?.uninstall();
  installed = undefined;
};
const withLifeline = () => {
  installed ??= installDriverDeadlines();
};
/** One request: its calls in sequence, under a request span, each through `each`, all through `whole`. */
const request =
  (whole: (calls: () => Promise<void>) => Promise<void>, each: (call: () => Promise<unknown>) => Promise<unknown>) =>
  (driver: Driver, i: number): Promise<void> =>
    tracer.startActiveSpan('GET /orders/:id', (span) =>
      whole(async () => {
        for (let n = 0; n < PER_REQUEST; n++) await each(() => driver.call(i * PER_REQUEST + n));
      }).finally(() => {
        span.end();
      }),
    );
const variants = [
  {
    name: 'instrumented driver, no lifeline',
    setup: withoutLifeline,
    request: request(
      (calls) => calls(),
      (call) => call(),
    ),
  },
  {
    name: "with lifeline, the calls under their request's deadline",
    setup: withLifeline,
    request: request(
      (calls) => withTimeout(REQUEST_DEADLINE_MS, calls),
      (call) => call(),
    ),
  },
  {
    name: "the request's deadline in the context, driver deadlines not installed (its span attributes alone)",
    setup: withoutLifeline,
    request: request(
      (calls) => withTimeout(REQUEST_DEADLINE_MS, calls),
      (call) => call(),
    ),
  },
  {
    name: 'with lifeline, each call under a deadline of its own',
    setup: withLifeline,
    request: request(
      (calls) => calls(),
      (call) => withTimeout(REQUEST_DEADLINE_MS, call),
    ),
  },
];
const [baseline, underRequest] = variants as [(typeof variants)[0], (typeof variants)[0]];

console.log(
  `## 1. Throughput: requests of ${String(PER_REQUEST)} calls in sequence, 16 requests in flight, ${String(ROUNDS)} rounds × ${CALLS.toLocaleString('en-US')} calls per variant (ABCD DCBA within a round), OTel instrumentation on\n`,
);
const rows: string[][] = [];
for (const driver of drivers) {
  const rates = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const cpu = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const ratios = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  for (let round = 0; round < ROUNDS + 1; round++) {
    const roundRates = new Map<string, number>();
    for (const variant of [...variants, ...[...variants].reverse()]) {
      variant.setup();
      // Each segment starts alike: no spans of the one before waiting for export. (Not gc() as well:
      // a forced full collection drops compiled code, and every segment then measured a warm-up.)
      await provider.forceFlush();
      const started = performance.now();
      const used = process.cpuUsage();
      await runConcurrently(CALLS / 2 / PER_REQUEST, 16, (i) => variant.request(driver, i));
      const spent = process.cpuUsage(used);
      roundRates.set(variant.name, (roundRates.get(variant.name) ?? 0) + CALLS / 2 / ((performance.now() - started) / 1_000) / 2);
      if (round > 0) cpu.get(variant.name)?.push((spent.user + spent.system) / (CALLS / 2));
    }
    if (round === 0) continue; // warm-up
    for (const [name, rate] of roundRates) {
      rates.get(name)?.push(rate);
      ratios.get(name)?.push(rate / (roundRates.get(baseline.name) ?? Number.NaN));
    }
  }
  for (const variant of variants) {
    rows.push([
      driver.name,
      variant.name,
      spread(summarize(rates.get(variant.name) ?? []), 0),
      fixed(summarize(cpu.get(variant.name) ?? []).median, 1),
      variant === baseline ? '1' : spread(summarize(ratios.get(variant.name) ?? [])),
    ]);
  }
  const ratio = summarize(ratios.get(underRequest.name) ?? []);
  target({
    figure: `${driver.name}: lifeline, calls under their request's deadline ÷ the instrumented driver without lifeline (req/s)`,
    measured: spread(ratio),
    target: '≥ 0.97',
    met: ratio.median >= 0.97,
  });
}
table(['driver', 'variant', 'calls/s median (min–max)', 'CPU µs / call (median)', '÷ without lifeline (per-round ratios)'], rows);

console.log(
  `## 2. Abort lateness: rejection − deadline, ${String(LATENESS_CALLS)} calls the server does not answer in time, 10 in flight (ms)\n`,
);
installed ??= installDriverDeadlines();
const blocking = new Redis({ host: redis.host, port: redis.port });
const lateness: [string, Awaited<ReturnType<typeof stallsDuring<number[]>>>][] = [
  [
    'pg pg_sleep(5), cancelled on the server',
    await stallsDuring(() =>
      abortLateness(
        LATENESS_CALLS,
        10,
        () => 20 + Math.random() * 30,
        () => pool.query('SELECT pg_sleep(5)'),
      ),
    ),
  ],
  [
    'ioredis BLPOP 0 (the server ends its wait at the deadline)',
    await stallsDuring(() =>
      abortLateness(
        LATENESS_CALLS,
        10,
        () => 20 + Math.random() * 30,
        (i) => blocking.blpop(`empty${String(i % 10)}`, 0),
      ),
    ),
  ],
];
// A deadline due while the loop stands (a collector's pause, or the thread not running at all)
// fires after it: what stopped the loop in the same window, beside the percentiles it lands in.
const pausesOf = (pauses: number[]): string => {
  if (pauses.length === 0) return 'none';
  const total = pauses.reduce((sum, ms) => sum + ms, 0);
  const longest = pauses.slice(0, 3).map((ms) => fixed(ms, 1));
  return `${String(pauses.length)}, ${fixed(total, 1)} ms in all; longest ${longest.join(', ')} ms`;
};
table(
  ['case', 'p50', 'p99', 'max', 'GC pauses meanwhile', 'loop delay p99 / max (ms)'],
  lateness.map(([name, { result: late, gcPauses, loopDelayP99Ms, loopDelayMaxMs }]) => [
    name,
    fixed(percentile(late, 0.5), 1),
    fixed(percentile(late, 0.99), 1),
    fixed(percentile(late, 1), 1),
    pausesOf(gcPauses),
    `${fixed(loopDelayP99Ms, 1)} / ${fixed(loopDelayMaxMs, 1)}`,
  ]),
);
for (const [name, { result: late, gcPauses, loopDelayMaxMs }] of lateness) {
  target({
    figure: `abort lateness p99, ${name} (ms)`,
    measured: `${fixed(percentile(late, 0.99), 1)} (p50 ${fixed(percentile(late, 0.5), 1)}, max ${fixed(percentile(late, 1), 1)}; GC pauses ${pausesOf(gcPauses)}; loop delay max ${fixed(loopDelayMaxMs, 1)} ms)`,
    target: '≤ 5',
    met: percentile(late, 0.99) <= 5,
  });
}

installed.uninstall();
blocking.disconnect();
client.disconnect();
await pool.end();
await Promise.all([postgres.stop(), redis.stop()]);
for (const instrumentation of instrumentations) instrumentation.disable();
await provider.shutdown();
