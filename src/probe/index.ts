export {
  answeredByLifeline,
  EventLoopBlockedError,
  isLoopback,
  startProbeServer,
  type HealthView,
  type ProbeServer,
  type ProbeServerOptions,
} from './probe-server.js';
