// The folder's OpenTelemetry instrumentations, apart from index.ts: the root entry imports index.ts
// and must not load @opentelemetry/instrumentation. lifeline's SDK wiring imports this.
export { GrpcDeadlineInstrumentation, type GrpcDeadlineInstrumentationConfig } from './deadline-instrumentation.js';
export { GrpcHealthInstrumentation } from './health-instrumentation.js';
