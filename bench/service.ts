/**
 * bench/service: what a user feels. The same small service (each request fetches an upstream,
 * keep-alive, and answers with its body) started three ways, each in a process of its own: on a
 * plain OpenTelemetry NodeSDK with the undici and http instrumentations; the same with
 * `AbortSignal.timeout` written by hand on each fetch (what lifeline's deadlines replace); and with
 * `startLifeline`'s defaults (every fetch under a deadline, the probe server, the watchdog thread).
 * autocannon loads each in turn, in interleaved rounds (ABC·CBA); the figures are per-round ratios.
 * Everything shares the 2 cores: autocannon, the service and the upstream, so the ratio is of
 * CPU-bound throughput. BENCH_QUICK=1: fewer, shorter rounds.
 * Run: npm run bench:service
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { fixed, spread, startPeer, summarize, table, target } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const ROUNDS = quick ? 2 : 6;
const SECONDS = quick ? 3 : 8;
const CONNECTIONS = 16;
const VARIANTS = ['plain', 'handwritten', 'lifeline'] as const;
const NAMES: Record<(typeof VARIANTS)[number], string> = {
  plain: 'NodeSDK, undici + http instrumentations',
  handwritten: 'the same + AbortSignal.timeout(10 s) on each fetch, by hand',
  lifeline: 'startLifeline defaults, fetch under a deadline',
};

const upstream = await startPeer('ok');

/** CPU time (user + system, µs) a process has used so far, from /proc: the service's own cost, whatever else runs. */
function cpuUsedUs(pid: number | undefined): number {
  const fields = readFileSync(`/proc/${String(pid)}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  // Fields 14 and 15 of stat (utime, stime), here at 11 and 12 once pid and (comm) are cut, in clock ticks.
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100; // USER_HZ, 100 on every Linux architecture node runs on

async function startService(variant: string): Promise<{ url: string; pid: number | undefined; stop: () => Promise<void> }> {
  // BENCH_PROFILE=1: each service writes a CPU profile (flame graph) when it exits.
  const profile =
    process.env.BENCH_PROFILE === '1'
      ? ['--cpu-prof', `--cpu-prof-dir=${new URL(`./results/profiles/service-${variant}`, import.meta.url).pathname}`]
      : [];
  const child = spawn(process.execPath, [...profile, new URL('./service-app.mjs', import.meta.url).pathname], {
    cwd: new URL('..', import.meta.url).pathname,
    // No collector, no metrics or logs: both variants drop their spans in-process.
    env: { ...process.env, VARIANT: variant, UPSTREAM: `${upstream.url}/`, OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => {
      reject(new Error(`the ${variant} service exited with ${String(code)}`));
    });
  });
  const { port } = JSON.parse(line) as { port: number };
  return {
    url: `http://127.0.0.1:${port}/`,
    pid: child.pid,
    // SIGTERM: the service exits normally, so a --cpu-prof profile gets written.
    stop: () =>
      new Promise((resolve) => {
        const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

const results = new Map<string, { rps: number[]; p99: number[]; cpuPerRequestUs: number[]; errors: number }>(
  VARIANTS.map((v) => [v, { rps: [], p99: [], cpuPerRequestUs: [], errors: 0 }]),
);
for (let round = 0; round < ROUNDS; round++) {
  for (const variant of round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()) {
    const service = await startService(variant);
    await autocannon({ url: service.url, connections: CONNECTIONS, duration: 2 }); // warm up: JIT, sockets
    const cpuBefore = cpuUsedUs(service.pid);
    const run = await autocannon({ url: service.url, connections: CONNECTIONS, duration: SECONDS });
    const cpuUs = cpuUsedUs(service.pid) - cpuBefore;
    await service.stop();
    const r = results.get(variant);
    r?.cpuPerRequestUs.push(cpuUs / run.requests.total);
    r?.rps.push(run.requests.average);
    r?.p99.push(run.latency.p99);
    if (r !== undefined) r.errors += run.non2xx + run.errors;
  }
}
upstream.stop();

const plain = results.get('plain');
const byHand = results.get('handwritten');
const ours = results.get('lifeline');
console.log(
  `## A service on startLifeline ÷ the same service on a plain NodeSDK, and with deadlines written by hand: ${CONNECTIONS} connections, ${ROUNDS} rounds × ${SECONDS} s each (ABC·CBA)\n`,
);
table(
  ['service', 'req/s median (min–max)', 'p99 ms median', 'service CPU µs per request, median (min–max)', 'errors'],
  VARIANTS.map((variant) => {
    const r = results.get(variant);
    return [
      NAMES[variant],
      spread(summarize(r?.rps ?? []), 0),
      fixed(summarize(r?.p99 ?? []).median, 1),
      spread(summarize(r?.cpuPerRequestUs ?? []), 1),
      String(r?.errors ?? 0),
    ];
  }),
);
const ratio = summarize((ours?.rps ?? []).map((rps, i) => rps / (plain?.rps[i] ?? Number.NaN)));
target({
  figure: 'a startLifeline service ÷ the same service on a plain NodeSDK (req/s, per round)',
  measured: spread(ratio, 3),
  target: '≥ 0.95',
  met: ratio.median >= 0.95,
  note: 'CPU-bound: load generator, service and upstream share 2 cores',
});
// The service's own CPU per request is steadier than req/s: it does not count what autocannon and
// the upstream took from the same cores meanwhile.
const cpuRatio = summarize((plain?.cpuPerRequestUs ?? []).map((us, i) => us / (ours?.cpuPerRequestUs[i] ?? Number.NaN)));
target({
  figure: 'the same, as service CPU per request: plain NodeSDK ÷ startLifeline (per round)',
  measured: spread(cpuRatio, 3),
  target: '≥ 0.95',
  met: cpuRatio.median >= 0.95,
  note: `${fixed(summarize(ours?.cpuPerRequestUs ?? []).median, 1)} vs ${fixed(summarize(plain?.cpuPerRequestUs ?? []).median, 1)} µs per request`,
});
// What a user compares lifeline with: the same deadlines written by hand.
const handRatio = summarize((ours?.rps ?? []).map((rps, i) => rps / (byHand?.rps[i] ?? Number.NaN)));
target({
  figure: 'a startLifeline service ÷ the NodeSDK service with AbortSignal.timeout by hand (req/s, per round)',
  measured: spread(handRatio, 3),
  target: '≥ 1.00',
  met: handRatio.median >= 1,
});
// Added CPU per request over the plain service, within each round: lifeline's against the hand-written one's.
const added = (r: typeof ours): number[] => (r?.cpuPerRequestUs ?? []).map((us, i) => us - (plain?.cpuPerRequestUs[i] ?? Number.NaN));
const addedOurs = summarize(added(ours));
const addedByHand = summarize(added(byHand));
target({
  figure: 'service CPU per request added over the plain NodeSDK service: startLifeline vs by hand (µs, per round)',
  measured: `${spread(addedOurs, 1)} vs ${spread(addedByHand, 1)}`,
  target: '≤ the hand-written one',
  met: addedOurs.median <= addedByHand.median,
});
process.exit(0);
