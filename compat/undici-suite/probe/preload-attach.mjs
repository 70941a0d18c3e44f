import { createRequire } from 'node:module'
import path from 'node:path'
const dist = process.env.LIFELINE_DIST || path.join(import.meta.dirname, '../../../dist') // <repo>/dist
const { withTimeout } = await import(path.join(dist, 'index.js'))
const { context } = createRequire(path.join(dist, 'index.js'))('@opentelemetry/api')
context.attach(withTimeout(120000, () => context.active()))
console.error('[preload] pid', process.pid, 'argv', process.argv.slice(1).join(' '))
