/**
 * npm run bench: every benchmark, one after another (they share two cores, so never at once), into
 * bench/results/latest.md (the tables, as printed) and bench/results/latest.json (the same rows).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, type as osType, release } from 'node:os';
import type { TargetRow } from './support.ts';

const BENCHES = [
  'startup',
  'catalog',
  'diagnostics',
  'redaction',
  'deadline',
  'per-call',
  'many-calls',
  'http-clients',
  'drivers',
  'probe-servers',
  'service',
  'sampling',
  'collector-tier',
  'probe-flood',
  'debug-diagnostics',
  'watchdog',
];
const dir = new URL('./results/', import.meta.url).pathname;
mkdirSync(dir, { recursive: true });
const jsonLines = `${dir}latest.jsonl`;
rmSync(jsonLines, { force: true });

const machine = `${osType()} ${release()}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
const sections: string[] = [
  `# lifeline benchmark results\n\nRun ${new Date().toISOString()} on ${machine}. Reproduce: \`npm run bench\`. Method and meaning: BENCHMARKS.md.\n`,
];
const started = Date.now();
for (const name of BENCHES) {
  const t = Date.now();
  process.stderr.write(`bench/${name} …\n`);
  // BENCH_PROFILE=1: a CPU profile of each benchmark process (open a .cpuprofile in Chrome DevTools'
  // Performance panel or speedscope for its flame graph); the processes it spawns write their own.
  const profile = process.env.BENCH_PROFILE === '1' ? ['--cpu-prof', `--cpu-prof-dir=${dir}profiles/${name}`] : [];
  const run = spawnSync(process.execPath, [...profile, '--expose-gc', new URL(`./${name}.ts`, import.meta.url).pathname], {
    env: { ...process.env, BENCH_JSON: jsonLines, BENCH_NAME: name },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 2 ** 20,
  });
  if (run.status !== 0) throw new Error(`bench/${name} failed with ${String(run.status)}`);
  sections.push(`# bench/${name} (${Math.round((Date.now() - t) / 1_000)} s)\n\n${run.stdout.trim()}\n`);
  process.stdout.write(run.stdout);
}
sections.push(`Total: ${Math.round((Date.now() - started) / 1_000)} s.\n`);
const records = readFileSync(jsonLines, 'utf8')
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as { bench?: string; target?: TargetRow });
const targets = records.filter((r): r is { bench: string; target: TargetRow } => r.target !== undefined);
const tables = records.filter((r) => r.target === undefined);
// Every figure with a target, beside it, first: the rest of the report is how each was measured.
const summary = [
  `## Targets (${String(targets.filter((t) => t.target.met === true).length)} of ${String(targets.filter((t) => t.target.met !== undefined).length)} met)\n`,
  '| bench | figure | measured: median (min–max) | target | met |',
  '|---|---|---|---|---|',
  ...targets.map(
    ({ bench, target }) =>
      `| ${bench} | ${target.figure}${target.note === undefined ? '' : ` — ${target.note}`} | ${target.measured} | ${target.target} | ${target.met === undefined ? '—' : target.met ? 'yes' : '**no**'} |`,
  ),
  '',
].join('\n');
sections.splice(1, 0, summary);
process.stdout.write(`\n${summary}`);
writeFileSync(`${dir}latest.md`, sections.join('\n'));
writeFileSync(`${dir}latest.json`, `${JSON.stringify({ machine, date: new Date().toISOString(), targets, tables }, null, 2)}\n`);
rmSync(jsonLines, { force: true });
process.stderr.write(`wrote bench/results/latest.md and latest.json in ${Math.round((Date.now() - started) / 1_000)} s\n`);
