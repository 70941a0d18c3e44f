export { Diagnostics, type DiagnosticsOptions, type StuckRound } from './diagnostics.js';
export { InFlightSpanProcessor, type CaptureStacks, type InFlightSpanProcessorOptions } from './in-flight-span-processor.js';
export type { BlockedLoop, DiagnosedComponent, DiagnosticSnapshot, HandleInfo, HealthDiagnostics, InFlightNode } from './types.js';
export { SnapshotIdGenerator } from './snapshot-ids.js';
export { ProcessView } from './process-view.js';
