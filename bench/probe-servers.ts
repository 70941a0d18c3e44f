/**
 * bench/probe-servers: lifeline's probe server against lightship and @godaddy/terminus, each in a
 * process of its own in the same state (one component, live), loaded by autocannon from this
 * process with the same concurrency. Rounds alternate the servers; medians and spread reported.
 * Run: npm run bench:probes
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { fixed, spread, summarize, table, target } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const ROUNDS = quick ? 1 : 3;
const SECONDS = quick ? 3 : 8;
const CONNECTIONS = 32;
const KINDS = ['lifeline', 'lightship', 'terminus', 'bare node:http'] as const;

async function startPeer(kind: string): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, [new URL('./probe-peer.mjs', import.meta.url).pathname], {
    env: { ...process.env, KIND: kind },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
  const { port, path } = JSON.parse(line) as { port: number; path: string };
  return { url: `http://127.0.0.1:${port}${path}`, stop: () => child.kill() };
}

const results = new Map<string, { rps: number[]; p50: number[]; p99: number[]; non2xx: number }>(
  KINDS.map((k) => [k, { rps: [], p50: [], p99: [], non2xx: 0 }]),
);
for (let round = 0; round < ROUNDS; round++) {
  for (const kind of round % 2 === 0 ? KINDS : [...KINDS].reverse()) {
    const peer = await startPeer(kind);
    await autocannon({ url: peer.url, connections: CONNECTIONS, duration: 1 }); // warm up
    const run = await autocannon({ url: peer.url, connections: CONNECTIONS, duration: SECONDS });
    peer.stop();
    const r = results.get(kind);
    r?.rps.push(run.requests.average);
    r?.p50.push(run.latency.p50);
    r?.p99.push(run.latency.p99);
    if (r !== undefined) r.non2xx += run.non2xx;
  }
}
// Peers are the probe libraries; bare node:http is the floor of any node:http server, shown for scale.
const PEERS = ['lightship', 'terminus'] as const;
const best = Math.max(...PEERS.map((k) => summarize(results.get(k)?.rps ?? []).median));
const bestP99 = Math.min(...PEERS.map((k) => summarize(results.get(k)?.p99 ?? []).median));
console.log(
  `## Probe servers: GET /live, ${CONNECTIONS} connections, ${ROUNDS} rounds × ${SECONDS} s per server (autocannon in a separate process)\n`,
);
table(
  ['server', 'req/s median (min–max)', '÷ best peer', 'p50 ms', 'p99 ms', 'non-2xx'],
  KINDS.map((kind) => {
    const r = results.get(kind);
    const rps = summarize(r?.rps ?? []);
    return [
      kind,
      `${fixed(rps.median, 0)} (${fixed(rps.min, 0)}–${fixed(rps.max, 0)})`,
      fixed(rps.median / best, 2),
      fixed(summarize(r?.p50 ?? []).median, 1),
      fixed(summarize(r?.p99 ?? []).median, 1),
      String(r?.non2xx ?? 0),
    ];
  }),
);
const ours = results.get('lifeline');
// Per round, against lightship in the same round: the rounds drift on a shared machine.
const toLightship = (ours?.rps ?? []).map((rps, i) => rps / (results.get('lightship')?.rps[i] ?? Number.NaN));
const ratio = summarize(toLightship);
target({
  figure: 'probe server req/s ÷ lightship (per-round ratio)',
  measured: spread(ratio, 2),
  target: '≥ 1.2',
  met: ratio.median >= 1.2,
  note: `autocannon shares the 2 cores; best peer ${fixed(best, 0)} req/s`,
});
const ourP99 = summarize(ours?.p99 ?? []);
target({
  figure: "probe server p99 latency vs the best peer's (ms)",
  measured: `${spread(ourP99, 1)} vs ${fixed(bestP99, 1)}`,
  target: "≤ the peer's",
  met: ourP99.median <= bestP99,
});
