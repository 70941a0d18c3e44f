#!/usr/bin/env node
// Compares lifeline variant runs of undici's tests against baseline.
//
//   node compare.mjs results/baseline.json results/<variant>.json [results/<variant2>.json ...]
//        [--baseline2 results/baseline-2.json] [--no-rerun] [--md <file>]
//
// A second baseline run marks flaky tests (those whose results differ between the two baseline
// runs). If the --baseline2 file (default ./results/baseline-2.json, next to this script) does
// not exist, it is produced first with `run.mjs --variant baseline` over the same files as the
// first baseline, unless --no-rerun. Prints markdown (summary table, flaky tests, every changed result per variant with
// the failure message); --md also writes it to a file.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const REPO = path.resolve(HERE, '../..')
const NODE = path.resolve(process.env.LIFELINE_NODE || path.join(REPO, 'node_modules/.bin/node'))

const args = process.argv.slice(2)
let baseline2Path = path.join(HERE, 'results', 'baseline-2.json')
let rerun = true
let mdPath
const positional = []
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--baseline2') baseline2Path = args[++i]
  else if (args[i] === '--no-rerun') rerun = false
  else if (args[i] === '--md') mdPath = args[++i]
  else positional.push(args[i])
}
if (positional.length < 2) {
  console.error('usage: node compare.mjs results/baseline.json results/<variant>.json [...] [--baseline2 f] [--no-rerun] [--md f]')
  process.exit(2)
}
const load = (p) => JSON.parse(fs.readFileSync(p, 'utf8'))
const baseline = load(positional[0])
const variants = positional.slice(1).map((p) => ({ path: p, run: load(p) }))

let baseline2
if (fs.existsSync(baseline2Path)) baseline2 = load(baseline2Path)
else if (rerun) {
  const globs = baseline.meta.globs
  console.error(`compare: no ${baseline2Path}; running a second baseline (${globs.length} globs) to detect flaky tests ...`)
  execFileSync(NODE, [path.join(HERE, 'run.mjs'), '--variant', 'baseline', '--files', globs.join(','), '--out', baseline2Path,
    '--timeout', String(baseline.meta.timeoutS ?? 120), '--concurrency', String(baseline.meta.concurrency ?? 2)], { stdio: ['ignore', 'ignore', 'inherit'] })
  baseline2 = load(baseline2Path)
}

const key = (file, test) => `${file}\u0000${test}`
function flatten (run) {
  const m = new Map()
  for (const [file, r] of Object.entries(run.files)) {
    if (!r) continue
    for (const [t, s] of Object.entries(r.tests)) m.set(key(file, t), s)
  }
  return m
}
function fileStatus (r) {
  if (!r) return 'not run'
  if (r.timedOut) return 'TIMEOUT'
  return r.signal ? `signal ${r.signal}` : `exit ${r.exitCode}`
}

const base = flatten(baseline)
const base2 = baseline2 ? flatten(baseline2) : undefined

// Flaky: differ between the two baseline runs (absent in one counts as a difference).
const flaky = new Map()
if (base2) {
  for (const k of new Set([...base.keys(), ...base2.keys()])) {
    const a = base.get(k) ?? 'absent'
    const b = base2.get(k) ?? 'absent'
    if (a !== b) flaky.set(k, `${a} / ${b}`)
  }
}
const flakyFiles = new Set()
if (baseline2) {
  for (const f of Object.keys(baseline.files)) {
    if (fileStatus(baseline.files[f]) !== fileStatus(baseline2.files[f])) flakyFiles.add(f)
  }
}

const out = []
const p = (s = '') => out.push(s)
const esc = (s) => String(s).replace(/\|/g, '\\|').replace(/\r?\n/g, ' ⏎ ')

function summaryRow (name, run) {
  const c = { pass: 0, fail: 0, skip: 0, todo: 0 }
  let files = 0; let nonzero = 0; let timeouts = 0
  for (const r of Object.values(run.files)) {
    if (!r) continue
    files++
    if (r.timedOut) timeouts++
    else if (r.exitCode !== 0) nonzero++
    for (const s of Object.values(r.tests)) c[s] = (c[s] ?? 0) + 1
  }
  const total = c.pass + c.fail + c.skip + c.todo
  return `| ${name} | ${files} | ${nonzero} | ${timeouts} | ${total} | ${c.pass} | ${c.fail} | ${c.skip} | ${c.todo} | ${run.meta.durationS ?? '?'} s |`
}

p('# undici test suite under lifeline variants')
p()
p(`undici ${baseline.meta.undiciVersion ?? '?'} @ ${baseline.meta.undiciCommit ?? '?'}, node ${baseline.meta.nodeVersion ?? '?'}`)
p()
for (const v of variants) {
  const m = v.run.meta
  const snap = m.lifelineSnapshot ? ` (snapshot of ${m.lifelineSnapshot.source} @ ${m.lifelineSnapshot.gitHead?.slice(0, 7)}, ${m.lifelineSnapshot.dirtyFiles} dirty files, dist built ${m.lifelineSnapshot.distNewestFile})` : ''
  p(`- ${m.variant}: lifeline dist ${m.lifelineDist ?? '?'} sha256 ${m.lifelineDistSha256?.slice(0, 12) ?? '?'}${snap}${m.lifelineDistChangedDuringRun ? ' — **dist CHANGED during the run**' : ''}`)
}
p()
p('| run | files | files exit≠0 | files timed out | tests | pass | fail | skip | todo | wall time |')
p('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
p(summaryRow(`baseline (${path.basename(positional[0])})`, baseline))
if (baseline2) p(summaryRow(`baseline (${path.basename(baseline2Path)})`, baseline2))
for (const v of variants) p(summaryRow(`${v.run.meta.variant} (${path.basename(v.path)})`, v.run))
p()

if (baseline2) {
  p(`## Flaky in baseline (differ between the two baseline runs): ${flaky.size} tests, ${flakyFiles.size} files`)
  p()
  for (const f of flakyFiles) p(`- file \`${f}\`: ${fileStatus(baseline.files[f])} / ${fileStatus(baseline2.files[f])}`)
  for (const [k, v] of flaky) { const [f, t] = k.split('\u0000'); p(`- \`${f}\` — ${esc(t)}: ${v}`) }
  p()
} else {
  p('_No second baseline: flaky tests not detected._')
  p()
}

for (const v of variants) {
  const vm = flatten(v.run)
  const rows = []
  for (const k of new Set([...base.keys(), ...vm.keys()])) {
    const a = base.get(k) ?? 'absent'
    const b = vm.get(k) ?? 'absent'
    if (a === b) continue
    const [file, test] = k.split('\u0000')
    const isFlaky = flaky.has(k) || flakyFiles.has(file) || (base2 && (base2.get(k) ?? 'absent') === b)
    const err = (b === 'fail' ? v.run.files[file]?.errors?.[test] : baseline.files[file]?.errors?.[test]) ?? ''
    rows.push({ file, test, a, b, isFlaky, err })
  }
  const fileRows = []
  for (const f of new Set([...Object.keys(baseline.files), ...Object.keys(v.run.files)])) {
    const a = fileStatus(baseline.files[f]); const b = fileStatus(v.run.files[f])
    if (a !== b) fileRows.push({ f, a, b, isFlaky: flakyFiles.has(f) })
  }
  const real = rows.filter((r) => !r.isFlaky)
  p(`## ${v.run.meta.variant}: ${real.length} changed results (+${rows.length - real.length} flaky), ${fileRows.length} files with changed exit status`)
  p()
  if (fileRows.length) {
    p('| file | baseline | ' + v.run.meta.variant + ' | flaky |')
    p('| --- | --- | --- | --- |')
    for (const r of fileRows) p(`| ${r.f} | ${r.a} | ${r.b} | ${r.isFlaky ? 'FLAKY' : ''} |`)
    p()
  }
  if (rows.length) {
    p(`| file | test | baseline → ${v.run.meta.variant} | flaky | message (of the failing side) |`)
    p('| --- | --- | --- | --- | --- |')
    rows.sort((x, y) => (x.isFlaky - y.isFlaky) || x.file.localeCompare(y.file))
    for (const r of rows) p(`| ${r.file} | ${esc(r.test)} | ${r.a} → ${r.b} | ${r.isFlaky ? 'FLAKY' : ''} | ${esc(r.err.slice(0, 600))} |`)
    p()
  }
}

const text = out.join('\n')
console.log(text)
if (mdPath) fs.writeFileSync(mdPath, text + '\n')
