'use strict'
// Harness probe (not an undici test): checks, per variant, that
//  - a lifeline deadline is (or is not) in the async context of node:test hooks, tests,
//    suites, subtests, timers and server handlers;
//  - the global undici dispatcher seen by the repo's undici is (or is not) lifeline's;
//  - (sdk-deadline) the OpenTelemetry undici instrumentation adds traceparent.
// Run: node run.mjs --variant <v> --files "$PWD/probe/probe-deadline.cjs" --out results/probe-<v>.json
const { test, describe, before } = require('node:test')
const assert = require('node:assert')
const { createServer } = require('node:http')
const { once } = require('node:events')
const path = require('node:path')
const undici = require(process.env.UNDICI_DIR || path.join(__dirname, '../undici'))

const dist = process.env.LIFELINE_DIST || path.join(__dirname, '../../../dist') // <repo>/dist
const variant = process.env.LIFELINE_VARIANT || 'baseline'
const expectDeadline = ['deadline', 'sdk-deadline', 'context-only', 'compose'].includes(variant)
// Any variant that loads lifeline also loads its own undici (node_modules/undici), whose
// lib/global.js installs a default global Agent when none is set yet: even context-only sees
// a global dispatcher that is not the repo's Agent.
const expectForeignDispatcher = variant !== 'baseline'
const expectTraceparent = variant === 'sdk-deadline'

async function cd () {
  const { currentDeadline } = await import(path.join(dist, 'index.js'))
  return currentDeadline()
}
function check (d, where, source = 'scope') {
  if (!expectDeadline) return assert.strictEqual(d, undefined, `unexpected deadline in ${where}`)
  assert.ok(d, `no deadline in ${where}`)
  assert.strictEqual(d.source, source, where)
  assert.ok(d.remainingMs() > 60000 && d.remainingMs() <= 120000, `remaining ${d.remainingMs()} in ${where}`)
}
let inBefore
before(async () => { inBefore = await cd() })
test('deadline in before hook and top-level test body', async () => {
  check(inBefore, 'before hook')
  check(await cd(), 'test body')
  await new Promise((resolve) => setTimeout(resolve, 10))
  check(await cd(), 'after setTimeout')
})
describe('suite', () => {
  test('deadline in nested test and subtest', async (t) => {
    check(await cd(), 'nested test')
    await t.test('subtest', async () => check(await cd(), 'subtest'))
  })
})
test('global dispatcher and request through the repo undici', async (t) => {
  let inHandler, headers
  const server = createServer(async (req, res) => { headers = req.headers; inHandler = await cd(); res.end('ok') })
  server.listen(0)
  await once(server, 'listening')
  t.after(() => server.close())
  const g = undici.getGlobalDispatcher()
  assert.strictEqual(!(g instanceof undici.Agent), expectForeignDispatcher, `global dispatcher is ${g.constructor.name}`)
  const res = await undici.request(`http://localhost:${server.address().port}`)
  assert.strictEqual(await res.body.text(), 'ok')
  // With the SDK, the http instrumentation extracts the propagated deadline header inbound.
  check(inHandler, 'server handler', variant === 'sdk-deadline' ? 'inbound' : 'scope')
  assert.strictEqual('traceparent' in headers, expectTraceparent, `headers: ${JSON.stringify(headers)}`)
})
test('the global dispatcher aborts at the context deadline (lifeline dispatcher variants)', { skip: !['dispatcher', 'deadline', 'sdk-deadline', 'compose'].includes(variant) }, async (t) => {
  const { withTimeout } = await import(path.join(dist, 'index.js'))
  const server = createServer(() => {}) // never answers
  server.listen(0)
  await once(server, 'listening')
  t.after(() => { server.closeAllConnections(); server.close() })
  const started = Date.now()
  await assert.rejects(withTimeout(200, () => undici.request(`http://localhost:${server.address().port}`)), { name: 'DeadlineExceededError' })
  assert.ok(Date.now() - started < 5000)
})
