/**
 * Start-up cost of register mode: time from spawning a small ES module HTTP service until it
 * answers its first request, its RSS then, and the CPU it used, for plain Node, OpenTelemetry's
 * own `auto-instrumentations-node/register` (alone, and with the loader hook it documents for ES
 * module apps), and lifeline's register (with and without the auto-instrumentations package),
 * serving its probes. Every variant exports traces the same way: OTLP http/protobuf to a loopback
 * port nobody listens on; metrics and logs off. Rounds are interleaved (ABCD·DCBA) so
 * drift of a shared machine hits every variant alike. BENCH_QUICK=1: fewer rounds.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fixed, spread, summarize, table, target } from './support.ts';

interface Variant {
  name: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

const ROUNDS = process.env.BENCH_QUICK === '1' ? 4 : 10;
const app = new URL('./startup-app.mjs', import.meta.url).pathname;
const exporting = {
  OTEL_TRACES_EXPORTER: 'otlp',
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', // discard port: nothing answers
  OTEL_METRICS_EXPORTER: 'none',
  OTEL_LOGS_EXPORTER: 'none',
};
// lifeline serves its probes, as in a deployment: on a port free now (one child runs at a time).
const probe = createServer();
await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
const PROBE_PORT = String((probe.address() as { port: number }).port);
await new Promise((resolve) => probe.close(resolve));
const VARIANTS: Variant[] = [
  { name: 'plain node', args: [app], env: {} },
  {
    name: 'OTel auto-instrumentations-node/register',
    args: ['--import', '@opentelemetry/auto-instrumentations-node/register', app],
    env: exporting,
  },
  // What OpenTelemetry documents for ES module apps: its register plus its (off-thread) loader hook.
  {
    name: 'OTel register + its ESM loader hook',
    args: [
      '--import',
      '@opentelemetry/auto-instrumentations-node/register',
      '--experimental-loader=@opentelemetry/instrumentation/hook.mjs',
      app,
    ],
    env: exporting,
  },
  {
    name: 'lifeline register, with the auto-instrumentations',
    args: ['--import', 'otel-lifeline/register', app],
    env: { ...exporting, LIFELINE_PROBE_PORT: PROBE_PORT },
  },
  // The watchdog thread is an isolate of its own: this variant shows what it adds.
  {
    name: 'lifeline register, with the auto-instrumentations, no watchdog thread',
    args: ['--import', 'otel-lifeline/register', app],
    env: { ...exporting, LIFELINE_PROBE_PORT: PROBE_PORT, LIFELINE_WATCHDOG: 'off' },
  },
  {
    name: 'lifeline register, its own instrumentations',
    args: ['--import', 'otel-lifeline/register', app],
    env: { ...exporting, LIFELINE_PROBE_PORT: PROBE_PORT, LIFELINE_AUTO_INSTRUMENTATIONS: 'off' },
  },
];

interface Run {
  readyMs: number;
  rssMb: number;
  cpuMs: number;
}

async function startOnce(variant: Variant): Promise<Run> {
  const started = performance.now();
  // stderr ignored: OTel's cloud resource detectors warn when there is no cloud metadata service.
  const child = spawn(process.execPath, variant.args, {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...process.env, ...variant.env },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', resolve);
      child.once('exit', (code) => {
        reject(new Error(`${variant.name} exited with ${String(code)} before answering`));
      });
    });
    const { port } = JSON.parse(line) as { port: number };
    const body = (await (await fetch(`http://127.0.0.1:${port}/`)).json()) as { rss: number; cpuMs: number };
    return { readyMs: performance.now() - started, rssMb: body.rss / 2 ** 20, cpuMs: body.cpuMs };
  } finally {
    child.kill('SIGKILL');
    if (child.exitCode === null && child.signalCode === null) await new Promise((resolve) => child.once('exit', resolve));
  }
}

const runs = new Map<string, Run[]>(VARIANTS.map((v) => [v.name, []]));
for (const variant of VARIANTS) await startOnce(variant); // warm the file cache
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
  for (const variant of order) runs.get(variant.name)?.push(await startOnce(variant));
}

const baseline = runs.get(VARIANTS[1]?.name ?? '') ?? [];
const med = (values: number[]): number => summarize(values).median;
const spreadOf = (values: number[], digits = 0): string => spread(summarize(values), digits);
console.log(`Start-up until the first answer, ${ROUNDS} interleaved rounds; median (min–max); ratios against OTel's register.\n`);
table(
  ['variant', 'time to first answer, ms', 'RSS, MB', 'CPU, ms', 'time ÷ OTel', 'RSS ÷ OTel'],
  VARIANTS.map((variant) => {
    const r = runs.get(variant.name) ?? [];
    const ready = r.map((x) => x.readyMs);
    const rss = r.map((x) => x.rssMb);
    return [
      variant.name,
      spreadOf(ready),
      spreadOf(rss),
      spreadOf(r.map((x) => x.cpuMs)),
      fixed(med(ready) / med(baseline.map((x) => x.readyMs)), 2),
      fixed(med(rss) / med(baseline.map((x) => x.rssMb)), 2),
    ];
  }),
);
// Per round against OTel's register in the same round: the rounds drift on a shared machine.
const ours = runs.get(VARIANTS[3]?.name ?? '') ?? [];
// The targets of issue 29: no slower than OpenTelemetry's register, and at most 5% more memory.
for (const [figure, of, bound] of [
  ["register start-up, time to first answer ÷ OTel's register (same instrumentations)", (r: Run) => r.readyMs, 1],
  ["register start-up, RSS ÷ OTel's register (same instrumentations)", (r: Run) => r.rssMb, 1.05],
] as const) {
  const ratio = summarize(ours.map((r, i) => of(r) / of(baseline[i] ?? r)));
  target({ figure, measured: spread(ratio, 2), target: `≤ ${bound.toFixed(2)}`, met: ratio.median <= bound });
}
