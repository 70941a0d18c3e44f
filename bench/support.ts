import { execFileSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { isDeadlineExceeded, withDeadline } from 'otel-lifeline';
/** Helpers shared by the benchmarks: repeated timing, medians, and a markdown-ish report. */

export interface Sample {
  median: number;
  min: number;
  max: number;
}

/**
 * Times `fn` `runs` times (after `warmup` untimed runs) and returns ms statistics; `prepare`
 * runs untimed before each call.
 */
export function timeRuns(fn: () => void, runs: number, options: { warmup?: number; prepare?: () => void } = {}): Sample {
  const { warmup = 3, prepare } = options;
  for (let i = 0; i < warmup; i++) {
    prepare?.();
    fn();
  }
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    prepare?.();
    const started = process.hrtime.bigint();
    fn();
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return summarize(times);
}

export function summarize(values: number[]): Sample {
  const sorted = values.slice().sort((a, b) => a - b);
  return { median: percentile(sorted, 0.5), min: sorted[0] ?? Number.NaN, max: sorted[sorted.length - 1] ?? Number.NaN };
}

/** The p-th percentile (0..1) of already sorted values, nearest rank. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? Number.NaN;
}

export function fixed(value: number, digits = 3): string {
  return Number.isFinite(value) ? value.toFixed(digits) : String(value);
}

/** Prints a markdown table (and, under `npm run bench`, records it for the JSON report). */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): void {
  const jsonPath = process.env.BENCH_JSON;
  if (jsonPath !== undefined) appendFileSync(jsonPath, `${JSON.stringify({ bench: process.env.BENCH_NAME, header, rows })}\n`);
  console.log(`| ${header.join(' | ')} |`);
  console.log(`|${header.map(() => '---').join('|')}|`);
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
  console.log();
}

/** One figure a benchmark has a target for, as `npm run bench` lists them together. */
export interface TargetRow {
  /** What is measured, e.g. `keep-alive fetch: lifeline ÷ OTel-only`. */
  figure: string;
  /** The figure with its spread, e.g. `0.981 (0.912–1.043)`. */
  measured: string;
  /** The target, e.g. `≥ 0.97`. */
  target: string;
  /** Whether the median meets it; `undefined` for a figure reported without a target. */
  met: boolean | undefined;
  /** Why a figure is what it is, when a reader needs it (CPU-bound on 2 cores, say). */
  note?: string;
}

/** Prints one target line and, under `npm run bench`, records it for the summary at the top of the report. */
export function target(row: TargetRow): void {
  const jsonPath = process.env.BENCH_JSON;
  if (jsonPath !== undefined) appendFileSync(jsonPath, `${JSON.stringify({ bench: process.env.BENCH_NAME, target: row })}\n`);
  const verdict = row.met === undefined ? 'no target' : row.met ? 'met' : 'MISSED';
  console.log(
    `Target — ${row.figure}: ${row.measured}, target ${row.target}: ${verdict}${row.note === undefined ? '' : ` (${row.note})`}\n`,
  );
}

/** `median (min–max)` of a sample, with `digits` decimals. */
export function spread(sample: Sample, digits = 3): string {
  return `${fixed(sample.median, digits)} (${fixed(sample.min, digits)}–${fixed(sample.max, digits)})`;
}

/** Starts bench/server.mjs in its own process; resolves with its URL and a stop function. */
export async function startPeer(mode: 'ok' | 'silent'): Promise<{ url: string; stop: () => void }> {
  const { spawn } = await import('node:child_process');
  const { createInterface } = await import('node:readline');
  const child = spawn(process.execPath, [new URL('./server.mjs', import.meta.url).pathname], {
    env: { ...process.env, MODE: mode },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
  const { port } = JSON.parse(line) as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => {
      child.kill();
    },
  };
}

/** Settles the heap: a few full GCs with turns of the event loop between. Needs --expose-gc. */
export async function settledHeap(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with --expose-gc');
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage().heapUsed;
}

/** Runs `count` calls of `call`, `concurrency` at a time. */
export async function runConcurrently(count: number, concurrency: number, call: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await call(next++);
    }),
  );
}

/** An exporter that drops every span: the benchmarks measure making spans, not shipping them. */
export class DiscardExporter {
  exported = 0;
  export(spans: readonly unknown[], done: (result: { code: 0 }) => void): void {
    this.exported += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * Abort lateness: `calls` calls of `call(i)`, `concurrency` at a time, each under a deadline
 * `budget()` ms away, to a peer that never answers; returns how late each rejected, in ms, sorted.
 */
export async function abortLateness(
  calls: number,
  concurrency: number,
  budget: () => number,
  call: (i: number) => Promise<unknown>,
): Promise<number[]> {
  const late: number[] = [];
  await runConcurrently(calls, concurrency, async (i) => {
    // Deadlines live on the Date.now() clock; performance.now() gives the sub-ms part of the lateness.
    const at = Date.now() + budget();
    const atPerf = performance.now() + (at - Date.now());
    const error = await withDeadline(at, () => call(i)).catch((err: unknown) => err);
    if (!isDeadlineExceeded(error)) throw new Error(`expected a deadline error, got ${String(error)}`);
    late.push(performance.now() - atPerf);
  });
  return late.sort((a, b) => a - b);
}

/**
 * What stopped the event loop while `run` ran: the garbage collector's pauses (ms, longest first)
 * and the loop's delays (a 1 ms histogram). A deadline due while the loop stands fires late, so a
 * lateness percentile is read beside them: a late call with no pause is the thread not running.
 */
export async function stallsDuring<T>(
  run: () => Promise<T>,
): Promise<{ result: T; gcPauses: number[]; loopDelayP99Ms: number; loopDelayMaxMs: number }> {
  const gcPauses: number[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcPauses.push(entry.duration);
  });
  observer.observe({ entryTypes: ['gc'] });
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  try {
    const result = await run();
    // A pause reaches the observer two immediates later (queued natively, then dispatched).
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    for (const entry of observer.takeRecords()) gcPauses.push(entry.duration);
    return {
      result,
      gcPauses: gcPauses.sort((a, b) => b - a),
      loopDelayP99Ms: delay.percentile(99) / 1e6,
      loopDelayMaxMs: delay.max / 1e6,
    };
  } finally {
    observer.disconnect();
    delay.disable();
  }
}

/**
 * `sig0<value>&sig1<value>&…`, at least `bytes` long: distinct short keys that look secret, the
 * query shape that made redaction quadratic (`value` '' gives `sig0&sig1&…`).
 */
export function adversarialQuery(bytes: number, value = '', first = 0): string {
  const parts: string[] = [];
  let length = -1;
  for (let i = first; length < bytes; i++) {
    const part = `sig${String(i)}${value}`;
    parts.push(part);
    length += part.length + 1;
  }
  return parts.join('&');
}

/**
 * Free text of one unit repeated, the shapes that cost redaction most per byte (bench/redaction):
 * a harmless pair whose value runs on into the next pair (`a=a=…`: quadratic while a pair's value
 * was matched and then rescanned), percent-encoded keys, quoted values.
 */
export const WORST_ADVERSARIAL_TEXT: readonly (readonly [shape: string, unit: string])[] = [
  ['`a=a=…`', 'a='],
  ['`%74=%74=…`', '%74='],
  ['`a="a="…`', 'a="'],
  ['`x: "x: "…`', 'x: "'],
];
/** {@link WORST_ADVERSARIAL_TEXT}, and more ways a scan could read the same bytes again (JSON, credential words, JWT-like runs). */
export const ADVERSARIAL_TEXT: readonly (readonly [shape: string, unit: string])[] = [
  ...WORST_ADVERSARIAL_TEXT,
  ['`"a":"a":…`', '"a":'],
  ['`\\"a\\":\\"…`', String.raw`\"a\":\"`],
  ['`Bearer Bearer …`', 'Bearer '],
  ['`eyJa.eyJa.…`', 'eyJa.'],
  ['`;a=;a=…`', ';a='],
  ['`aaa.bbb.ccc.…`', 'aaa.bbb.ccc.'],
];

/** `unit` repeated to exactly `bytes` characters. */
export function repeatedTo(unit: string, bytes: number): string {
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

/**
 * CPU time per call spent in lifeline's own functions (self time in a V8 CPU profile of `run`,
 * which makes `calls` calls), by package: far steadier than a throughput ratio on a shared
 * machine, since it counts only samples inside the code, not what the neighbours did meanwhile.
 * lifeline's functions are those of its built `dist/` (files outside node_modules) but its bundled
 * undici (`dist/_chunks/undici*.cjs`: the transport, which the baseline runs from node_modules);
 * `total` is every sampled function but idle.
 */
export async function profiledSelfTimeUs(calls: number, run: () => Promise<void>): Promise<{ lifeline: number; total: number }> {
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
    await run();
    const { profile } = await session.post('Profiler.stop');
    const selfUs = new Map<number, number>();
    const samples = profile.samples ?? [];
    const deltas = profile.timeDeltas ?? [];
    for (let i = 0; i < samples.length; i++) selfUs.set(samples[i] ?? -1, (selfUs.get(samples[i] ?? -1) ?? 0) + (deltas[i] ?? 0));
    let lifeline = 0;
    let total = 0;
    for (const node of profile.nodes) {
      const us = selfUs.get(node.id) ?? 0;
      if (node.callFrame.functionName === '(idle)') continue;
      total += us;
      const { url } = node.callFrame;
      if (url.startsWith('file:') && url.includes('/dist/') && !url.includes('/node_modules/') && !url.includes('/_chunks/undici'))
        lifeline += us;
    }
    return { lifeline: lifeline / calls, total: total / calls };
  } finally {
    session.disconnect();
  }
}

/**
 * Puts the servers `pids` (and the processes they start later) on the machine's last CPU and this
 * process on the others, as a database on a host of its own would be: on a 2-core machine a
 * server's bursts (PostgreSQL forking a backend per cancel request) otherwise preempt the client
 * being measured, and ratios swing with who ran where. Says what it did; without `taskset` (or with
 * one CPU) it changes nothing.
 */
export function pinApart(pids: readonly number[]): string {
  const cpus = availableParallelism();
  if (cpus < 2) return 'one CPU: not pinned';
  const last = String(cpus - 1);
  const rest = cpus === 2 ? '0' : `0-${String(cpus - 2)}`;
  try {
    for (const pid of pids) execFileSync('taskset', ['-a', '-p', '-c', last, String(pid)], { stdio: 'ignore' });
    execFileSync('taskset', ['-a', '-p', '-c', rest, String(process.pid)], { stdio: 'ignore' });
  } catch (error) {
    return `not pinned (${error instanceof Error ? error.message.split('\n')[0] : String(error)})`;
  }
  return `servers on CPU ${last}, the benchmark on CPU ${rest}`;
}

/** A pg pool of `max` connections to a server the bench started (`startPostgres`). */
export function pgPoolConfig(
  server: { host: string; port: number; user: string; password: string; database: string },
  max: number,
): { host: string; port: number; user: string; password: string; database: string; max: number } {
  const { host, port, user, password, database } = server;
  return { host, port, user, password, database, max };
}
