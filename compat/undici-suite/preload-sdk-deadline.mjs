// Variant "sdk-deadline": OpenTelemetry NodeSDK through startLifeline (undici + http + pino
// instrumentation, W3C trace context + baggage + deadline propagators, no exporter, no probe
// server) with the deadline dispatcher (60 s default policy). The test file runs inside
// withTimeout(120 s) via deadline-context.cjs (--require).
import { importDist } from './lifeline-dist.mjs'
const { startLifeline } = await importDist('sdk/index.js')
const { currentDeadline } = await importDist('index.js')
await startLifeline({ probe: false, handleSigterm: false, spanProcessors: [], deadlines: { defaultTimeoutMs: 60000 } })
if (process.env.LIFELINE_PRELOAD_CHECK !== '0' && currentDeadline() === undefined) {
  process.emitWarning('lifeline harness: no deadline in context (was deadline-context.cjs --require-d?)')
}
