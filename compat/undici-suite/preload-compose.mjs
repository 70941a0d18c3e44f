// Variant "compose": like "deadline", and every dispatcher of the undici under test (its own
// Client, Pool, Agent… — everything built on DispatcherBase) goes through lifeline's
// deadlineInterceptor, as an app composing its own clients with it would.
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { importDist } from './lifeline-dist.mjs'
const { installDeadlineDispatcher, deadlineInterceptor } = await importDist('index.js')
installDeadlineDispatcher({ defaultTimeoutMs: 60000 })
// run.mjs passes the undici checkout under test as UNDICI_DIR.
const undiciDir = path.resolve(process.env.UNDICI_DIR || path.join(path.dirname(fileURLToPath(import.meta.url)), 'undici'))
const DispatcherBase = createRequire(import.meta.url)(path.join(undiciDir, 'lib/dispatcher/dispatcher-base.js'))
const original = DispatcherBase.prototype.dispatch
const interceptor = deadlineInterceptor()
DispatcherBase.prototype.dispatch = function dispatch (opts, handler) {
  return interceptor((o, h) => original.call(this, o, h))(opts, handler)
}
