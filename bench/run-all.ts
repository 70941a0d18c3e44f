/**
 * npm run bench: every benchmark, one after another (they share two cores, so never at once), into
 * bench/results/latest.md (the tables, as printed) and bench/results/latest.json (the same rows).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, type as osType, release } from 'node:os';

const BENCHES = [
  'startup',
  'catalog',
  'diagnostics',
  'redaction',
  'deadline',
  'many-calls',
  'http-clients',
  'probe-servers',
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
  const run = spawnSync(process.execPath, ['--expose-gc', new URL(`./${name}.ts`, import.meta.url).pathname], {
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
writeFileSync(`${dir}latest.md`, sections.join('\n'));
const tables = readFileSync(jsonLines, 'utf8')
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as unknown);
writeFileSync(`${dir}latest.json`, `${JSON.stringify({ machine, date: new Date().toISOString(), tables }, null, 2)}\n`);
rmSync(jsonLines, { force: true });
process.stderr.write(`wrote bench/results/latest.md and latest.json in ${Math.round((Date.now() - started) / 1_000)} s\n`);
