export { startLifeline, type Lifeline, type LifelineOptions } from './start-lifeline.js';
export { GrpcDeadlineInstrumentation, type GrpcDeadlineInstrumentationConfig } from './grpc-deadline-instrumentation.js';
