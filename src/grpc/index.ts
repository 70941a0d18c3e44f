export { grpcDeadlineInterceptor, type GrpcCallOptions } from './grpc-deadlines.js';
// For lifeline's SDK (its gRPC instrumentation); not re-exported by the package.
export { boundUntilMetadata, grpcCallDeadline, grpcDeadline, runWithInboundDeadline } from './grpc-deadlines.js';
