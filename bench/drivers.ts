/**
 * bench/drivers: what deadlines on database and cache calls cost, against real servers on loopback.
 * 1. Throughput: pg `pool.query('SELECT $1')` and ioredis `GET`, 16 in flight, through OpenTelemetry's
 *    instrumentation of each driver: with lifeline's driver deadlines, every call under an active
 *    deadline (`withTimeout`) ÷ the same instrumented driver without lifeline. Rounds alternate
 *    ABBA; the ratio is taken within a round.
 * 2. Abort lateness (rejection − deadline) of calls the server never answers in time: pg
 *    `pg_sleep(5)` and Redis `BLPOP … 0`, 10 in flight, deadlines spread over 20–50 ms.
 * Run: npm run bench:drivers (PostgreSQL and Redis from Debian's packages, started in throwaway directories)
 */
import { trace } from '@opentelemetry/api';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { DeadlineSpanProcessor, installDriverDeadlines, withTimeout } from 'otel-lifeline';
import { startPostgres, startRedis } from '../test/support/databases.ts';
import { abortLateness, DiscardExporter, fixed, percentile, runConcurrently, spread, summarize, table, target } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const CALLS = quick ? 4_000 : 10_000;
const ROUNDS = quick ? 6 : 12;
const LATENESS_CALLS = quick ? 200 : 500;

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
const require = createRequire(import.meta.url);
const pg = require('pg') as typeof import('pg');
const { Redis } = require('ioredis') as typeof import('ioredis');

const postgres = await startPostgres();
const redis = await startRedis();
const pool = new pg.Pool({
  host: postgres.host,
  port: postgres.port,
  user: postgres.user,
  password: postgres.password,
  database: postgres.database,
  max: 8,
});
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
const variants = [
  {
    name: 'instrumented driver, no lifeline',
    setup: () => {
      installed?.uninstall();
      installed = undefined;
    },
    wrap: (call: () => Promise<unknown>) => call(),
  },
  {
    name: 'with lifeline, every call under a deadline',
    setup: () => {
      installed ??= installDriverDeadlines();
    },
    wrap: (call: () => Promise<unknown>) => withTimeout(30_000, call),
  },
];

console.log(
  `## 1. Throughput, 16 in flight, ${String(ROUNDS)} rounds × ${CALLS.toLocaleString('en-US')} calls per variant (ABBA within a round), OTel instrumentation on\n`,
);
const rows: string[][] = [];
for (const driver of drivers) {
  const rates = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const cpu = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const ratios: number[] = [];
  for (let round = 0; round < ROUNDS + 1; round++) {
    const roundRates = new Map<string, number>();
    for (const variant of [...variants, ...[...variants].reverse()]) {
      variant.setup();
      const started = performance.now();
      const used = process.cpuUsage();
      await runConcurrently(CALLS / 2, 16, (i) => variant.wrap(() => driver.call(i)));
      const spent = process.cpuUsage(used);
      roundRates.set(variant.name, (roundRates.get(variant.name) ?? 0) + CALLS / 2 / ((performance.now() - started) / 1_000) / 2);
      if (round > 0) cpu.get(variant.name)?.push((spent.user + spent.system) / (CALLS / 2));
    }
    if (round === 0) continue; // warm-up
    for (const [name, rate] of roundRates) rates.get(name)?.push(rate);
    ratios.push((roundRates.get(variants[1]?.name ?? '') ?? Number.NaN) / (roundRates.get(variants[0]?.name ?? '') ?? Number.NaN));
  }
  for (const variant of variants) {
    rows.push([
      driver.name,
      variant.name,
      spread(summarize(rates.get(variant.name) ?? []), 0),
      fixed(summarize(cpu.get(variant.name) ?? []).median, 1),
      variant === variants[1] ? spread(summarize(ratios)) : '1',
    ]);
  }
  target({
    figure: `${driver.name}: lifeline under an active deadline ÷ the instrumented driver without lifeline (req/s)`,
    measured: spread(summarize(ratios)),
    target: '≥ 0.97',
    met: summarize(ratios).median >= 0.97,
  });
}
table(['driver', 'variant', 'calls/s median (min–max)', 'CPU µs / call (median)', '÷ without lifeline (per-round ratios)'], rows);

console.log(
  `## 2. Abort lateness: rejection − deadline, ${String(LATENESS_CALLS)} calls the server does not answer in time, 10 in flight (ms)\n`,
);
installed ??= installDriverDeadlines();
const blocking = new Redis({ host: redis.host, port: redis.port });
const lateness: [string, number[]][] = [
  [
    'pg pg_sleep(5), cancelled on the server',
    await abortLateness(
      LATENESS_CALLS,
      10,
      () => 20 + Math.random() * 30,
      () => pool.query('SELECT pg_sleep(5)'),
    ),
  ],
  [
    'ioredis BLPOP 0 (the server ends its wait at the deadline)',
    await abortLateness(
      LATENESS_CALLS,
      10,
      () => 20 + Math.random() * 30,
      (i) => blocking.blpop(`empty${String(i % 10)}`, 0),
    ),
  ],
];
table(
  ['case', 'p50', 'p99', 'max'],
  lateness.map(([name, late]) => [name, fixed(percentile(late, 0.5), 1), fixed(percentile(late, 0.99), 1), fixed(percentile(late, 1), 1)]),
);
for (const [name, late] of lateness) {
  target({
    figure: `abort lateness p99, ${name} (ms)`,
    measured: `${fixed(percentile(late, 0.99), 1)} (p50 ${fixed(percentile(late, 0.5), 1)}, max ${fixed(percentile(late, 1), 1)})`,
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
