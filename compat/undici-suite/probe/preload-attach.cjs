const path = require('node:path')
const dist = process.env.LIFELINE_DIST || path.join(__dirname, '../../../dist') // <repo>/dist
const { withTimeout } = require(path.join(dist, 'index.js'))
const { context } = require(require.resolve('@opentelemetry/api', { paths: [dist] }))
context.attach(withTimeout(120000, () => context.active()))
