/**
 * bench/drivers-profile: where a driver call's CPU goes, with and without lifeline, from V8 CPU
 * profiles. Runs one variant of bench/drivers' requests (4 calls in sequence under a request span,
 * 16 requests in flight, OpenTelemetry's pg and ioredis instrumentations) in a process of its own
 * under `--cpu-prof`, once per variant, then prints self time per call by package and by function,
 * lifeline minus the bare instrumented driver (bench/profile-diff.mjs).
 * Run: npm run bench:drivers-profile -- [pg|ioredis] [calls] (PROFILE_BASE=context: the base is the
 * request's deadline and lifeline's span processor without driver deadlines, to see the drivers' own part)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const [, , which = 'pg', callsText = '40000', variant] = process.argv;
const calls = Number(callsText);
if (variant === undefined) {
  // The parent: one child per variant, each profiled.
  const profiles: [string, string][] = [];
  for (const name of [process.env.PROFILE_BASE ?? 'bare', 'lifeline']) {
    const dir = mkdtempSync(join(tmpdir(), `drivers-profile-${name}-`));
    const run = spawnSync(
      process.execPath,
      ['--cpu-prof', '--cpu-prof-interval', '200', `--cpu-prof-dir=${dir}`, fileURLToPath(import.meta.url), which, callsText, name],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    if (run.status !== 0) process.exit(run.status ?? 1);
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (file === undefined) throw new Error(`no profile in ${dir}`);
    profiles.push([name, join(dir, file)]);
  }
  const [[, bare], [, lifeline]] = profiles as [[string, string], [string, string]];
  console.log(`\n${which}: self time per call, lifeline − bare\n`);
  console.log(
    execFileSync(process.execPath, [fileURLToPath(new URL('profile-diff.mjs', import.meta.url)), lifeline, callsText, bare, callsText], {
      encoding: 'utf8',
    }),
  );
} else {
  const { trace, context } = await import('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
  const { IORedisInstrumentation } = await import('@opentelemetry/instrumentation-ioredis');
  const { PgInstrumentation } = await import('@opentelemetry/instrumentation-pg');
  const { BatchSpanProcessor, TracerProvider } = await import('@opentelemetry/sdk-trace');
  const { createRequire } = await import('node:module');
  const { DeadlineSpanProcessor, installDriverDeadlines, withTimeout } = await import('otel-lifeline');
  const { startPostgres, startRedis } = await import('../test/support/databases.ts');
  const { DiscardExporter, pgPoolConfig, pinApart, runConcurrently } = await import('./support.ts');
  // 'context': the request's deadline in the context and lifeline's span processor, driver deadlines not installed.
  const lifeline = variant !== 'bare';
  const exporter = new DiscardExporter();
  const provider = new TracerProvider({
    spanProcessors: [
      ...(lifeline ? [new DeadlineSpanProcessor()] : []),
      new BatchSpanProcessor({ exporter, maxQueueSize: 1 << 16, maxExportBatchSize: 4_096 }),
    ],
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  for (const instrumentation of [new PgInstrumentation(), new IORedisInstrumentation()]) {
    instrumentation.setTracerProvider(provider);
    instrumentation.enable();
  }
  const tracer = provider.getTracer('bench');
  const require = createRequire(import.meta.url);
  const installed = variant === 'lifeline' ? installDriverDeadlines() : undefined;
  let call: (i: number) => Promise<unknown>;
  let stop: () => Promise<void>;
  if (which === 'pg') {
    const postgres = await startPostgres();
    pinApart([postgres.pid]);
    const pg = require('pg') as typeof import('pg');
    const pool = new pg.Pool(pgPoolConfig(postgres, 8));
    call = (i) => pool.query('SELECT $1::int AS n', [i]);
    stop = async () => {
      await pool.end();
      await postgres.stop();
    };
  } else {
    const redis = await startRedis();
    pinApart([redis.pid]);
    const { Redis } = require('ioredis') as typeof import('ioredis');
    const client = new Redis({ host: redis.host, port: redis.port, lazyConnect: true });
    await client.connect();
    await client.set('bench', 'x');
    call = () => client.get('bench');
    stop = async () => {
      client.disconnect();
      await redis.stop();
    };
  }
  const request = (i: number): Promise<void> =>
    tracer.startActiveSpan('GET /orders/:id', (span) => {
      const calls = async (): Promise<void> => {
        for (let n = 0; n < 4; n++) await call(i * 4 + n);
      };
      return (lifeline ? withTimeout(30_000, calls) : calls()).finally(() => {
        span.end();
      });
    });
  await runConcurrently(calls / 4 / 4, 16, request); // warm-up
  await provider.forceFlush();
  const used = process.cpuUsage();
  const started = performance.now();
  await runConcurrently(calls / 4, 16, request);
  const spent = process.cpuUsage(used);
  await provider.forceFlush();
  console.log(`spans per call, warm-up included: ${(exporter.exported / (calls + calls / 4)).toFixed(2)}`);
  console.log(
    `${which} ${variant}: ${((calls / (performance.now() - started)) * 1_000).toFixed(0)} calls/s, ${((spent.user + spent.system) / calls).toFixed(1)} µs CPU per call`,
  );
  installed?.uninstall();
  await provider.shutdown();
  // The servers' stop can leave nothing for the loop to wait on: keep it alive until it is done.
  const alive = setInterval(() => undefined, 1_000);
  await stop();
  clearInterval(alive);
}
