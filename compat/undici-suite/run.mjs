#!/usr/bin/env node
// Runs undici's own test files (<undici checkout>/test/...) one process per file with Node 24's
// `node --test`, in a lifeline variant, and records every test's result.
//
//   node run.mjs --variant <baseline|dispatcher|deadline|sdk-deadline|context-only|compose>
//                [--files <glob>[,<glob>...]] [--relevant] [--out results/<variant>.json]
//                [--timeout <s per file, 120>] [--concurrency <2>] [--list]
//
// Environment (defaults relative to this folder, compat/undici-suite/ of the lifeline repo):
//   UNDICI_DIR     undici checkout under test      (default ./undici)
//   LIFELINE_DIST  lifeline build under test       (default <repo>/dist)
//   LIFELINE_NODE  Node 24 binary                  (default <repo>/node_modules/.bin/node)
//
// Globs are relative to the undici checkout (absolute paths allowed). --out defaults to
// ./results/<variant>.json (a given --out is relative to the current directory). Output JSON:
//   { meta: {...}, files: { "test/x.js": { exitCode, signal, timedOut, durationMs,
//       tests: { "suite > test": "pass"|"fail"|"skip"|"todo" }, suites: {...},
//       errors: { "suite > test": "message" } } } }
// Per-file logs (spec reporter + raw stdout/stderr): ./results/logs/<basename of --out>/<file>.log
import { execFileSync, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const REPO = path.resolve(HERE, '../..')
const RESULTS = path.join(HERE, 'results')
const UNDICI = path.resolve(process.env.UNDICI_DIR || path.join(HERE, 'undici'))
const NODE = path.resolve(process.env.LIFELINE_NODE || path.join(REPO, 'node_modules/.bin/node'))
const NODE_BIN_DIR = path.dirname(fs.realpathSync(NODE))
const LIFELINE_DIST = path.resolve(process.env.LIFELINE_DIST || path.join(REPO, 'dist'))

// Test groups of undici's package.json `test:javascript:no-jest` (borp globs), minus the skipped
// ones (see README.md): wpt, cache-tests (.mjs runner), jest, types/tsd, autobahn, fuzzing.
const DEFAULT_GLOBS = [
  'test/*.js', // test:unit
  'test/fetch/*.js', // test:fetch
  'test/webidl/*.js', // test:webidl (part of test:fetch)
  'test/busboy/*.js', // test:busboy (part of test:fetch)
  'test/node-fetch/**/*.js', // test:node-fetch
  'test/infra/*.js', // test:infra
  'test/cache/*.js', // test:cache
  'test/cache-interceptor/*.js', // test:cache-interceptor (cache-tests.mjs excluded by the glob, as in borp)
  'test/interceptors/*.js', // test:interceptors
  'test/cookie/*.js', // test:cookies
  'test/eventsource/*.js', // test:eventsource
  'test/subresource-integrity/*.js', // test:subresource-integrity
  'test/websocket/**/*.js', // test:websocket
  'test/node-test/**/*.js' // test:node-test
]
// The subset most relevant to lifeline (used when the full suite is too slow).
export const RELEVANT_GLOBS = [
  'test/fetch/*.js', 'test/interceptors/*.js', 'test/node-test/**/*.js', 'test/issue-*.js',
  'test/client*.js', 'test/request*.js', 'test/proxy*.js', 'test/env-http-proxy-agent*.js', 'test/formdata*.js'
]

const CONTEXT = ['--require', path.join(HERE, 'deadline-context.cjs')]
const VARIANTS = {
  baseline: [],
  dispatcher: ['--import', path.join(HERE, 'preload-dispatcher.mjs')],
  deadline: [...CONTEXT, '--import', path.join(HERE, 'preload-deadline.mjs')],
  'sdk-deadline': [...CONTEXT, '--import', path.join(HERE, 'preload-sdk-deadline.mjs')],
  compose: [...CONTEXT, '--import', path.join(HERE, 'preload-compose.mjs')],
  // control: the deadline context alone, no dispatcher, no SDK (isolates harness artifacts)
  'context-only': [...CONTEXT]
}

// sha256 over "<sha256(file)>  dist/<path>" lines, like snapshot-lifeline.sh: identifies the build.
function distHash (dist) {
  const files = fs.globSync('**/*', { cwd: dist }).filter((f) => fs.statSync(path.join(dist, f)).isFile())
    .map((f) => `dist/${f.split(path.sep).join('/')}`).sort()
  const lines = files.map((f) => `${createHash('sha256').update(fs.readFileSync(path.join(dist, f.slice(5)))).digest('hex')}  ${f}\n`)
  return createHash('sha256').update(lines.join('')).digest('hex')
}

function parseArgs (argv) {
  const o = { variant: undefined, files: undefined, out: undefined, timeout: 120, concurrency: 2, list: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const val = () => { if (i + 1 >= argv.length) throw new Error(`${a} needs a value`); return argv[++i] }
    if (a === '--variant') o.variant = val()
    else if (a === '--files') o.files = [...(o.files ?? []), ...val().split(',').filter(Boolean)]
    else if (a === '--relevant') o.files = [...(o.files ?? []), ...RELEVANT_GLOBS]
    else if (a === '--out') o.out = val()
    else if (a === '--timeout') o.timeout = Number(val())
    else if (a === '--concurrency') o.concurrency = Number(val())
    else if (a === '--list') o.list = true
    else throw new Error(`unknown argument ${a}`)
  }
  if (!o.variant || !(o.variant in VARIANTS)) throw new Error(`--variant must be one of ${Object.keys(VARIANTS).join(', ')}`)
  o.out ??= path.join(RESULTS, `${o.variant}.json`)
  return o
}

function listFiles (globs) {
  const set = new Set()
  for (const g of globs) {
    if (path.isAbsolute(g) && fs.existsSync(g) && !/[*?[{]/.test(g)) { set.add(g); continue }
    for (const f of fs.globSync(g, { cwd: UNDICI })) {
      const abs = path.resolve(UNDICI, f)
      if (fs.statSync(abs).isFile()) set.add(abs)
    }
  }
  return [...set].sort().map((abs) => ({ abs, key: path.relative(UNDICI, abs) }))
}

// Rebuild full name paths from the reporter's records (report order: children before parent).
function buildResults (records, fileAbs) {
  const pending = []
  for (const r of records) {
    const n = r.nesting ?? 0
    r.children = pending[n + 1] ?? []
    pending[n + 1] = []
    ;(pending[n] ??= []).push(r)
  }
  const tests = {}
  const suites = {}
  const errors = {}
  const put = (map, name, value) => {
    let k = name
    for (let i = 2; k in map; i++) k = `${name} [#${i}]`
    map[k] = value
    return k
  }
  const walk = (node, prefix) => {
    const name = node.name === fileAbs ? '<file>' : node.name
    const full = prefix ? `${prefix} > ${name}` : name
    const k = put(node.kind === 'suite' ? suites : tests, full, node.status)
    if (node.error && node.status === 'fail') errors[node.kind === 'suite' ? `[suite] ${k}` : k] = node.error
    for (const c of node.children) walk(c, full)
  }
  for (const root of pending[0] ?? []) walk(root, '')
  // Records left at deeper levels: their parent never finished (file killed at timeout).
  for (let n = 1; n < pending.length; n++) for (const orphan of pending[n] ?? []) walk(orphan, '<unfinished>')
  return { tests, suites, errors }
}

function runFile (file, opts, logDir) {
  return new Promise((resolve) => {
    const slug = file.key.replace(/[/\\]/g, '__')
    const jsonl = path.join(logDir, `${slug}.jsonl`)
    const log = path.join(logDir, `${slug}.log`)
    fs.rmSync(jsonl, { force: true })
    const args = [
      '--expose-gc',
      ...VARIANTS[opts.variant],
      '--test',
      `--test-reporter=${path.join(HERE, 'reporter.mjs')}`, `--test-reporter-destination=${jsonl}`,
      '--test-reporter=spec', '--test-reporter-destination=stdout',
      file.abs
    ]
    // Some tests spawn `node` from PATH (e.g. client-node-max-header-size.js): make that Node 24 too.
    const env = { ...process.env, PATH: `${NODE_BIN_DIR}${path.delimiter}${process.env.PATH ?? ''}`, LIFELINE_DIST, UNDICI_DIR: UNDICI, LIFELINE_VARIANT: opts.variant, FORCE_COLOR: '0', NO_COLOR: '1' }
    delete env.NODE_OPTIONS
    delete env.NODE_TEST_CONTEXT
    const out = fs.openSync(log, 'w')
    fs.writeSync(out, `# ${NODE} ${args.join(' ')}\n# cwd ${UNDICI}\n`)
    const started = Date.now()
    const child = spawn(NODE, args, { cwd: UNDICI, env, stdio: ['ignore', out, out], detached: true })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      try { process.kill(-child.pid, 'SIGKILL') } catch { /* already gone */ }
    }, opts.timeout * 1000)
    child.on('exit', (exitCode, signal) => {
      clearTimeout(timer)
      // The test file's own stray children (servers, workers) go with the group.
      try { process.kill(-child.pid, 'SIGKILL') } catch { /* already gone */ }
      fs.closeSync(out)
      let records = []
      try {
        records = fs.readFileSync(jsonl, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
      } catch { /* no report: the file crashed or was killed before its first result */ }
      resolve({ exitCode, signal, timedOut, durationMs: Date.now() - started, ...buildResults(records, file.abs) })
    })
  })
}

// The checkout's git HEAD; undefined unless UNDICI is the top of its own git work tree (not a
// folder inside another repository, such as this one).
function undiciCommit () {
  const git = (...args) => execFileSync('git', ['-C', UNDICI, ...args], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim()
  try {
    if (fs.realpathSync(git('rev-parse', '--show-toplevel')) === fs.realpathSync(UNDICI)) return git('rev-parse', 'HEAD')
  } catch { /* no git, or not a git checkout */ }
  return undefined
}

async function main () {
  const opts = parseArgs(process.argv.slice(2))
  if (!fs.existsSync(path.join(UNDICI, 'package.json'))) {
    throw new Error(`no undici checkout at ${UNDICI}: clone it there or set UNDICI_DIR (see README.md)`)
  }
  const files = listFiles(opts.files ?? DEFAULT_GLOBS)
  if (opts.list) { for (const f of files) console.log(f.key); return }
  const logDir = path.join(RESULTS, 'logs', path.basename(opts.out, '.json'))
  fs.mkdirSync(logDir, { recursive: true })
  fs.mkdirSync(path.dirname(path.resolve(opts.out)), { recursive: true })
  const started = Date.now()
  const lifelineHashAtStart = opts.variant === 'baseline' ? undefined : distHash(LIFELINE_DIST)
  const results = {}
  let next = 0
  let done = 0
  const worker = async () => {
    while (next < files.length) {
      const file = files[next++]
      const r = await runFile(file, opts, logDir)
      results[file.key] = r
      done++
      const c = { pass: 0, fail: 0, skip: 0, todo: 0 }
      for (const s of Object.values(r.tests)) c[s]++
      console.log(`[${opts.variant}] ${done}/${files.length} ${file.key} exit=${r.exitCode ?? r.signal}${r.timedOut ? ' TIMEOUT' : ''} ` +
        `${(r.durationMs / 1000).toFixed(1)}s pass=${c.pass} fail=${c.fail} skip=${c.skip} todo=${c.todo}`)
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency) }, worker))
  const ordered = {}
  for (const f of files) ordered[f.key] = results[f.key]
  const lifelineHashAtEnd = opts.variant === 'baseline' ? undefined : distHash(LIFELINE_DIST)
  if (lifelineHashAtStart !== lifelineHashAtEnd) {
    console.error(`[${opts.variant}] WARNING: ${LIFELINE_DIST} changed during the run; results mix builds (use snapshot-lifeline.sh)`)
  }
  const snapshotFile = path.join(path.dirname(LIFELINE_DIST), 'SNAPSHOT.json')
  const meta = {
    variant: opts.variant,
    node: NODE,
    nodeVersion: execFileSync(NODE, ['--version']).toString().trim(),
    lifelineDist: opts.variant === 'baseline' ? undefined : LIFELINE_DIST,
    lifelineDistSha256: lifelineHashAtEnd,
    lifelineDistChangedDuringRun: lifelineHashAtStart !== lifelineHashAtEnd || undefined,
    lifelineSnapshot: opts.variant !== 'baseline' && fs.existsSync(snapshotFile) ? JSON.parse(fs.readFileSync(snapshotFile, 'utf8')) : undefined,
    undiciDir: UNDICI,
    undiciCommit: undiciCommit(),
    undiciVersion: JSON.parse(fs.readFileSync(path.join(UNDICI, 'package.json'), 'utf8')).version,
    globs: opts.files ?? DEFAULT_GLOBS,
    timeoutS: opts.timeout,
    concurrency: opts.concurrency,
    startedAt: new Date(started).toISOString(),
    durationS: Math.round((Date.now() - started) / 1000)
  }
  fs.writeFileSync(opts.out, JSON.stringify({ meta, files: ordered }, null, 1))
  console.log(`[${opts.variant}] ${files.length} files in ${meta.durationS}s -> ${opts.out}`)
}

main().catch((err) => { console.error(err); process.exit(2) })
