/**
 * bench/probe-flood: what a flood of the probe port costs the app on the same event loop. A
 * service process runs an app server and a probe server; autocannon, in a process of its own,
 * sends GET /live flat out on 32 keep-alive connections while this process times GET / on the app
 * (one request every 10 ms). Kinds, interleaved over rounds: plain node:http answering /live (the
 * baseline any probe server on the app's loop costs), lifeline with its default limits (a request
 * budget of 1,000/s), and lifeline without the budget. Run: npm run bench:probe-flood
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Agent, request } from 'undici';
import { fixed, percentile, summarize, table } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const ROUNDS = quick ? 1 : 3;
const SECONDS = quick ? 3 : 6;
const KINDS = ['plain', 'lifeline', 'lifeline-unbounded'] as const;

async function startService(kind: string): Promise<{ app: number; probe: number; child: ChildProcess }> {
  const child = spawn(process.execPath, [new URL('./probe-flood-app.mjs', import.meta.url).pathname], {
    env: { ...process.env, KIND: kind },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve) =>
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', resolve),
  );
  return { ...(JSON.parse(line) as { app: number; probe: number }), child };
}

/** Starts autocannon in a process of its own against `url`; resolves with its req/s when done. */
function flood(url: string, seconds: number): Promise<number> {
  const script = `import autocannon from 'autocannon'; const r = await autocannon({ url: ${JSON.stringify(url)}, connections: 32, duration: ${String(seconds)} }); console.log(JSON.stringify({ rps: r.requests.average }));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: new URL('..', import.meta.url).pathname,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve) =>
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', (line) => {
      resolve((JSON.parse(line) as { rps: number }).rps);
    }),
  );
}

/** GET / on the app every 10 ms for `ms`: latencies in ms. */
async function timeApp(port: number, ms: number, agent: Agent): Promise<number[]> {
  const latencies: number[] = [];
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const started = performance.now();
    const res = await request(`http://127.0.0.1:${String(port)}/`, { dispatcher: agent });
    await res.body.text();
    latencies.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return latencies.sort((a, b) => a - b);
}

const results = new Map(
  KINDS.map((k) => [k, { quietP50: [] as number[], p50: [] as number[], p99: [] as number[], floodRps: [] as number[] }]),
);
for (let round = 0; round < ROUNDS; round++) {
  for (const kind of round % 2 === 0 ? KINDS : [...KINDS].reverse()) {
    const service = await startService(kind);
    const agent = new Agent();
    const quiet = await timeApp(service.app, 2_000, agent);
    const flooding = flood(`http://127.0.0.1:${String(service.probe)}/live`, SECONDS);
    await new Promise((resolve) => setTimeout(resolve, 500)); // autocannon started and connected
    const during = await timeApp(service.app, (SECONDS - 1.5) * 1_000, agent);
    const rps = await flooding;
    await agent.close();
    service.child.kill();
    const r = results.get(kind);
    r?.quietP50.push(percentile(quiet, 0.5));
    r?.p50.push(percentile(during, 0.5));
    r?.p99.push(percentile(during, 0.99));
    r?.floodRps.push(rps);
  }
}
console.log(
  `## Probe flood: the app's GET / latency while GET /live is flooded (32 connections, flat out), ${String(ROUNDS)} rounds × ${String(SECONDS)} s per kind\n`,
);
const cell = (values: number[], digits: number) => {
  const s = summarize(values);
  return `${fixed(s.median, digits)} (${fixed(s.min, digits)}–${fixed(s.max, digits)})`;
};
table(
  ['probe server', 'app p50 quiet ms', 'app p50 flooded ms', 'app p99 flooded ms', 'probe answers/s'],
  KINDS.map((kind) => {
    const r = results.get(kind);
    return [kind, cell(r?.quietP50 ?? [], 2), cell(r?.p50 ?? [], 2), cell(r?.p99 ?? [], 1), cell(r?.floodRps ?? [], 0)];
  }),
);
const plainP50 = summarize(results.get('plain')?.p50 ?? []).median;
const oursP50 = summarize(results.get('lifeline')?.p50 ?? []).median;
console.log(
  `Target: under a flood the app's p50 with lifeline's probe server is no worse than with a plain node:http one (${fixed(oursP50, 2)} vs ${fixed(plainP50, 2)} ms, ${fixed(oursP50 / plainP50, 2)}×).\n`,
);
