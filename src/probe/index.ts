export { startProbeServer, type ProbeServer, type ProbeServerOptions } from './probe-server.js';
export { EventLoopBlockedError, type HealthView } from './health-view.js';
export { INSTANCE_ENV, instanceHolder, instanceValue, newInstanceKey } from './instance.js';
export { joinHolder, type MemberReporter } from './member-reporter.js';
export { findPortHolder } from './port-holder.js';
// Kept here for the folders that asked the probe server what loopback is; the rule is net/'s.
export { isLoopback } from '../net/index.js';
export { GRPC_HEALTH_DEFINITION, GRPC_HEALTH_SERVICES, serveGrpcHealth, type GrpcServerLike } from './grpc-health.js';
