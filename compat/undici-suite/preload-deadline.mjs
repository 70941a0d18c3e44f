// Variant "deadline": deadline dispatcher with a 60 s default policy. The test file itself runs
// inside withTimeout(120 s): that part is done by deadline-context.cjs (--require), because a
// context entered in an --import preload does not reach the main module (verified by probe).
import { importDist } from './lifeline-dist.mjs'
const { installDeadlineDispatcher, currentDeadline } = await importDist('index.js')
installDeadlineDispatcher({ defaultTimeoutMs: 60000 })
if (process.env.LIFELINE_PRELOAD_CHECK !== '0' && currentDeadline() === undefined) {
  process.emitWarning('lifeline harness: no deadline in context (was deadline-context.cjs --require-d?)')
}
