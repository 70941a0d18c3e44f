'use strict'
// Puts a lifeline deadline (withTimeout, default 120 s, $LIFELINE_TEST_DEADLINE_MS) into the
// OpenTelemetry context for the whole test file: a --require preload runs synchronously in the
// main bootstrap, so a context attached here (OTel API context.attach = ALS enterWith) is the
// async context the main module, and so every node:test test/hook, runs in. An --import
// preload's context does not survive into the main module. Skipped in the `node --test`
// orchestrator process (which also loads --require modules); the test-file child gets it.
if (!process.execArgv.includes('--test')) {
  const path = require('node:path')
  const dist = path.resolve(process.env.LIFELINE_DIST || path.join(__dirname, '../../dist')) // <repo>/dist
  const { withTimeout } = require(path.join(dist, 'index.js')) // require(esm), Node >= 22.12
  const { context } = require(require.resolve('@opentelemetry/api', { paths: [dist] }))
  const ms = Number(process.env.LIFELINE_TEST_DEADLINE_MS || 120000)
  context.attach(withTimeout(ms, () => context.active()))
}
