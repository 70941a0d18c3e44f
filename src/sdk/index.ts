export { startLifeline, type Lifeline, type LifelineOptions } from './start-lifeline.js';
export { forceFlush, lifelineParts, type LifelineParts, type LifelinePartsOptions } from './lifeline-parts.js';
export { GrpcDeadlineInstrumentation, type GrpcDeadlineInstrumentationConfig } from './grpc-deadline-instrumentation.js';
