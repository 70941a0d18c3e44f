export {
  EventLoopBlockedError,
  isLoopback,
  startProbeServer,
  type HealthView,
  type ProbeServer,
  type ProbeServerOptions,
} from './probe-server.js';
export { INSTANCE_ENV, instanceHolder, instanceValue, newInstanceKey } from './instance.js';
export { joinHolder, type MemberReporter } from './member-reporter.js';
export { findPortHolder } from './port-holder.js';
export { GRPC_HEALTH_DEFINITION, GRPC_HEALTH_SERVICES, serveGrpcHealth, type GrpcServerLike } from './grpc-health.js';
