/**
 * bench/probe-reconnect-storm: kubelet-style probes (a fresh connection each, 1 s timeout, every
 * 250 ms, from 127.0.0.1) while 3,000 silent clients that reconnect at once when cut hold the probe
 * port, spread over 200 source addresses or all from one. Lifeline's probe server (default limits)
 * and a plain node:http server, each in a process of its own, interleaved over rounds. Reports the
 * probes answered, attacker connects per second (each one a close by the server) and the server's
 * heap growth with the clients held. Run: npx tsc -p tsconfig.build.json && node bench/probe-reconnect-storm.ts
 * (BENCH_QUICK=1: one round of 10 s).
 */
import { probesUnderSilentFlood, type StormResult } from '../test/support/probe-storm.ts';
import { fixed, table } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const ROUNDS = quick ? 1 : 2;
const MS = quick ? 10_000 : 30_000;
const CLIENTS = 3_000;
const KINDS = ['lifeline', 'plain'] as const;

const rows: string[][] = [];
for (const addresses of [200, 1]) {
  const totals = new Map<string, StormResult[]>(KINDS.map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of round % 2 === 0 ? KINDS : [...KINDS].reverse()) {
      totals.get(kind)?.push(await probesUnderSilentFlood(kind, { clients: CLIENTS, addresses, ms: MS, periodMs: 250, timeoutMs: 1_000 }));
    }
  }
  for (const kind of KINDS) {
    const runs = totals.get(kind) ?? [];
    const answered = runs.reduce((n, r) => n + r.answered, 0);
    const probes = runs.reduce((n, r) => n + r.probes, 0);
    rows.push([
      kind,
      String(addresses),
      `${String(answered)}/${String(probes)} (${fixed((100 * answered) / probes, 1)} %)`,
      fixed(Math.max(...runs.map((r) => r.worstMs)), 0),
      runs.map((r) => fixed(r.connectsPerSecond, 0)).join(', '),
      runs.map((r) => fixed(r.heapGrowthBytes / 2 ** 20, 1)).join(', '),
    ]);
  }
}
console.log(
  `## Probe reconnect storm: ${String(CLIENTS)} silent clients that reconnect when cut, probes every 250 ms (1 s timeout), ${String(ROUNDS)} rounds × ${String(MS / 1_000)} s per kind\n`,
);
table(['probe server', 'attacker addresses', 'probes answered', 'slowest ms', 'attacker connects/s', 'server heap growth MB'], rows);
console.log('Target: at least 99 % of probes answered within 1 s in both shapes, and no fewer than plain node:http.\n');
