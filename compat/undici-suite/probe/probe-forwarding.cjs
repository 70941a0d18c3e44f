'use strict'
// Harness probe: which optional handler callbacks reach a handler dispatched through the global
// dispatcher (the repo's undici fetch/request use it), and the resource-timing fields that depend
// on them. Prints a JSON line per check (look in the log); asserts nothing lifeline-specific.
const { test } = require('node:test')
const { createServer } = require('node:http')
const { once } = require('node:events')
const { PerformanceObserver, performance } = require('node:perf_hooks')
const path = require('node:path')
const undici = require(process.env.UNDICI_DIR || path.join(__dirname, '../undici'))

test('callbacks seen by a raw handler on the global dispatcher', async (t) => {
  const server = createServer((req, res) => { req.resume(); req.on('end', () => res.end('ok')) }).listen(0)
  await once(server, 'listening')
  t.after(() => server.close())
  const seen = []
  await new Promise((resolve, reject) => {
    undici.getGlobalDispatcher().dispatch({ origin: `http://localhost:${server.address().port}`, path: '/', method: 'POST', body: 'hello' }, {
      onRequestStart () { seen.push('onRequestStart') },
      onRequestSent () { seen.push('onRequestSent') },
      onBodySent () { seen.push('onBodySent') },
      onResponseStarted () { seen.push('onResponseStarted') },
      onResponseStart () { seen.push('onResponseStart') },
      onResponseData () { seen.push('onResponseData') },
      onResponseEnd () { seen.push('onResponseEnd'); resolve() },
      onResponseError (c, e) { reject(e) }
    })
  })
  console.log('PROBE callbacks ' + JSON.stringify([...new Set(seen)]))
})

test('fetch resource timing', async (t) => {
  const server = createServer((req, res) => res.end('ok')).listen(0)
  await once(server, 'listening')
  t.after(() => server.close())
  const entry = new Promise((resolve) => {
    const obs = new PerformanceObserver((list) => { obs.disconnect(); resolve(list.getEntries()[0]) })
    obs.observe({ entryTypes: ['resource'] })
  })
  await (await undici.fetch(`http://localhost:${server.address().port}/`)).text()
  const e = await entry
  performance.clearResourceTimings()
  console.log('PROBE timing ' + JSON.stringify({ requestStart: e.requestStart > 0, responseStart: e.responseStart > 0, responseStartGeRequestStart: e.responseStart >= e.requestStart }))
})
