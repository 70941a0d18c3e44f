/**
 * lifeline with the OpenTelemetry SDK: {@link startLifeline} starts a NodeSDK with lifeline's processors,
 * propagator, instrumentations, deadlines, probe server and SIGTERM handling; {@link lifelineParts} hands
 * out the same parts for an SDK of your own.
 * @packageDocumentation
 */

export { startLifeline, type Lifeline, type LifelineOptions } from './start-lifeline.js';
export { forceFlush, lifelineParts } from './lifeline-parts.js';
export type { LifelineParts, LifelinePartsOptions } from './parts.js';
export { GrpcDeadlineInstrumentation, type GrpcDeadlineInstrumentationConfig } from '../grpc/instrumentations.js';
export type { RetryOptions } from '../export/index.js';
export { EvidenceSampler, EvidenceSpanProcessor, type EvidenceSpanProcessorOptions } from '../sampling/index.js';
// The span processors an SDK of your own may want singly; lifelineParts() composes them all, in order.
export { DEFAULT_SECRET_WORDS, REDACTED, RedactionSpanProcessor } from '../redaction/index.js';
export { SnapshotIdGenerator } from '../diagnostics/index.js';
export { DeadlineMetricsSpanProcessor, type DeadlineMetricsOptions } from '../metrics/index.js';
