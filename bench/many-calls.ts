/**
 * bench/many-calls: 100,000 deadline-bound calls in a row, and what they leave behind. Each call runs
 * under a deadline of its own (`withTimeout(60 s)`), so every deadline timer must be cleared by the
 * call ending, not by expiry. Per round and variant: the heap retained after the calls (settled by
 * forced GCs), the cost per call (wall time and client CPU), the connections opened (keep-alive
 * sockets must be reused) and any process warning (a listener added per call and never removed
 * shows as MaxListenersExceededWarning). The baseline is the same calls with no deadline: lifeline
 * is installed, but nothing bounds them, so they pass through untouched.
 * Clients: undici (`undici.request` and `fetch`, alternately, through the deadline dispatcher) and
 * node:http (`http.get` on a keep-alive agent, through lifeline's node:http deadlines); 32 in flight.
 * Run: npm run bench:many-calls  (the peer runs in its own process; BENCH_QUICK=1: 3 rounds)
 */
import { subscribe } from 'node:diagnostics_channel';
import { Agent as HttpAgent, get } from 'node:http';
import { installDeadlineDispatcher, installHttpDeadlines, withTimeout } from 'otel-lifeline';
import * as undici from 'undici';
import { fixed, runConcurrently, settledHeap, startPeer, summarize, table, type Sample } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const CALLS = 100_000;
const ROUNDS = quick ? 3 : 5;
const CONCURRENCY = 32;
const WARMUP_CALLS = 5_000;

const warnings: string[] = [];
process.on('warning', (warning) => warnings.push(`${warning.name}: ${warning.message}`));
// Every TCP client socket the process opens, whichever client (or undici copy) opens it.
let connections = 0;
subscribe('net.client.socket', () => connections++);

installDeadlineDispatcher();
installHttpDeadlines();
const peer = await startPeer('ok');
const agent = new HttpAgent({ keepAlive: true, maxSockets: CONCURRENCY });
const nodeHttp = (url: string): Promise<void> =>
  new Promise((resolve, reject) => {
    get(url, { agent }, (res) => {
      res.resume();
      res.on('end', resolve);
      res.on('error', reject);
    }).on('error', reject);
  });
const viaUndici = async (url: string, i: number): Promise<unknown> =>
  i % 2 === 0 ? (await undici.request(url)).body.text() : (await fetch(url)).text();

type Call = (url: string, i: number) => Promise<unknown>;
const clients: [string, Call][] = [
  ['undici (request + fetch)', viaUndici],
  ['node:http', nodeHttp],
];
const variants: [string, (call: Call) => (i: number) => Promise<unknown>][] = [
  ['no deadline (baseline)', (call) => (i) => call(`${peer.url}/${String(i)}`, i)],
  ['a deadline per call, withTimeout(60 s)', (call) => (i) => withTimeout(60_000, () => call(`${peer.url}/${String(i)}`, i))],
];

interface Run {
  retainedKiB: number;
  usPerCall: number;
  cpuUsPerCall: number;
  connections: number;
  warnings: number;
}
const runs = new Map<string, Run[]>();
/** Per round: the deadline variant's client CPU per call minus the baseline's, same round. */
const addedCpu = new Map<string, number[]>();

async function measure(run: (i: number) => Promise<unknown>): Promise<Run> {
  const before = await settledHeap();
  const opened = connections;
  const warned = warnings.length;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await runConcurrently(CALLS, CONCURRENCY, run);
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const after = await settledHeap();
  return {
    retainedKiB: (after - before) / 1_024,
    usPerCall: (ms * 1_000) / CALLS,
    cpuUsPerCall: (used.user + used.system) / CALLS,
    connections: connections - opened,
    warnings: warnings.length - warned,
  };
}

for (const [, call] of clients) {
  for (const [, wrap] of variants) await runConcurrently(WARMUP_CALLS, CONCURRENCY, wrap(call)); // connections, JIT, caches
}
for (let round = 0; round < ROUNDS; round++) {
  // AB in even rounds, BA in odd ones: a slow minute of the machine hits both variants alike.
  const order = round % 2 === 0 ? variants : [...variants].reverse();
  for (const [client, call] of clients) {
    const cpuThisRound = new Map<string, number>();
    for (const [variant, wrap] of order) {
      const result = await measure(wrap(call));
      const key = `${client}|${variant}`;
      runs.set(key, [...(runs.get(key) ?? []), result]);
      cpuThisRound.set(variant, result.cpuUsPerCall);
    }
    const [baseline, withDeadline] = variants.map(([variant]) => cpuThisRound.get(variant) ?? Number.NaN);
    addedCpu.set(client, [...(addedCpu.get(client) ?? []), (withDeadline ?? Number.NaN) - (baseline ?? Number.NaN)]);
  }
  process.stderr.write(`round ${String(round + 1)}/${String(ROUNDS)} done\n`);
}
peer.stop();
agent.destroy();

const spread = (sample: Sample, digits: number): string =>
  `${fixed(sample.median, digits)} (${fixed(sample.min, digits)}–${fixed(sample.max, digits)})`;
console.log(
  `## ${CALLS.toLocaleString('en-US')} calls in a row, ${String(CONCURRENCY)} in flight, keep-alive peer: median (min–max) of ${String(ROUNDS)} rounds\n`,
);
table(
  ['client', 'variant', 'heap retained, KiB', 'µs / call (wall)', 'client CPU µs / call', 'connections opened (max)', 'warnings'],
  clients.flatMap(([client]) =>
    variants.map(([variant]) => {
      const rows = runs.get(`${client}|${variant}`) ?? [];
      return [
        client,
        variant,
        spread(summarize(rows.map((r) => r.retainedKiB)), 0),
        spread(summarize(rows.map((r) => r.usPerCall)), 1),
        spread(summarize(rows.map((r) => r.cpuUsPerCall)), 1),
        String(Math.max(...rows.map((r) => r.connections))),
        String(rows.reduce((sum, r) => sum + r.warnings, 0)),
      ];
    }),
  ),
);
console.log(
  `A deadline adds, in client CPU per call (deadline − baseline, same round): ${clients
    .map(([client]) => `${client} ${spread(summarize(addedCpu.get(client) ?? []), 1)} µs`)
    .join('; ')}. Target: heap retained per 100,000 calls ≤ 1 MiB (~10 bytes a call, less than any per-call object), no warnings.\n`,
);
for (const warning of new Set(warnings)) console.log(`warning: ${warning}`);
process.exit(0);
