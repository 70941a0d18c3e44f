// Variant "dispatcher": lifeline's deadline dispatcher as the global undici dispatcher, no policy,
// no deadline in context, no SDK.
import { importDist } from './lifeline-dist.mjs'
const { installDeadlineDispatcher } = await importDist('index.js')
installDeadlineDispatcher()
