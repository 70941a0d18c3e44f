/**
 * lifeline: liveness probes that stay honest and deadlines that reach every remote call,
 * on OpenTelemetry. Among OpenTelemetry packages this entry depends on the API (and the
 * AsyncLocalStorage context manager) only, never on the SDK; importing it changes no global.
 * @packageDocumentation
 */

import { healthIntervalFromEnv } from './config/index.js';
import { processCatalog, type HealthCatalog } from './health/index.js';
import { serveGrpcHealth, type GrpcServerLike } from './probe/index.js';

// The root entry, by concept. Telemetry names are in `otel-lifeline/semconv`; SDK wiring (and the
// span processors an SDK of your own needs besides these two) in `otel-lifeline/sdk`.

// The catalog: components, ticks, verdicts. Tick and ComponentHandle are handed out by a catalog,
// never constructed: types only, so `new Tick()` does not compile.
export {
  HealthCatalog,
  type ComponentHandle,
  type Tick,
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- the old name, still exported until 1.0
  type ComponentProbe,
  type EventLoopStatus,
  type HealthCatalogOptions,
  type HealthStatus,
  type ProbeKind,
  type RegisterOptions,
} from './health/index.js';
// eslint-disable-next-line @typescript-eslint/no-deprecated -- the names before HealthCatalog, until 1.0
export { Health, type HealthOptions } from './health/index.js';

// Deadlines in the OpenTelemetry context.
export {
  DeadlineExceededError,
  contextWithoutDeadline,
  currentDeadline,
  isDeadlineExceeded,
  withDeadline,
  withoutDeadline,
  withTimeout,
  type Deadline,
  type DeadlineSource,
  type Started,
} from './deadline/index.js';

// Deadlines on remote calls, one install per client family, all under one policy's rules.
export {
  deadlineInterceptor,
  installDeadlineDispatcher,
  type DeadlineDispatcherOptions,
  type InstalledDeadlineDispatcher,
} from './undici/index.js';
export { installHttpDeadlines } from './http/index.js';
export { installHttp2Deadlines } from './http2/index.js';
export { installDriverDeadlines } from './drivers/index.js';
// What each install returns: the way back (`uninstall`, or `using`). The latest install is in force.
export type { Installed } from './install/index.js';
export { grpcDeadlineInterceptor, type GrpcCallOptions } from './grpc/index.js';
export { type DeadlineHeaderHosts, type DeadlinePolicyOptions, type DeadlineRule, type RuleValue } from './policy/index.js';

// Deadlines across services: the header out, and whose header in is obeyed.
export { DEADLINE_HEADER, DeadlinePropagator } from './propagation/index.js';
export { installInboundTrust, type InboundDeadlineOptions, type TrustInbound } from './inbound/index.js';

// Probes, and the watchdog thread that answers them while the event loop is blocked.
export { startProbeServer, type HealthView, type ProbeServer, type ProbeServerOptions } from './probe/index.js';
export { GRPC_HEALTH_SERVICES, type GrpcServerLike } from './probe/index.js';
export {
  startWatchdog,
  type BlockedFrame,
  type EventLoopBlock,
  type ServedProbeOptions,
  type Watchdog,
  type WatchdogOptions,
} from './watchdog/index.js';

// A verdict's evidence: deadlines on spans, what is in flight, the snapshot.
export { DeadlineSpanProcessor } from './deadline-spans/index.js';
export {
  Diagnostics,
  InFlightSpanProcessor,
  type CaptureStacks,
  type DiagnosedComponent,
  type DiagnosticSnapshot,
  type DiagnosticsOptions,
  type StuckRound,
  type HandleInfo,
  type HealthDiagnostics,
  type InFlightNode,
  type InFlightSpanProcessorOptions,
} from './diagnostics/index.js';
// What the in-flight processor and the watchdog take to redact; the processor that redacts exports is in `otel-lifeline/sdk`.
export type { RedactionOptions } from './redaction/index.js';

// Health as metrics.
export { installHealthMetrics, type HealthMetricsOptions } from './metrics/index.js';

// Errors and logs.
export { LifelineError, type LifelineErrorCode } from './errors/index.js';
export type { Logger } from './log/index.js';

/**
 * The process-wide catalog. It starts no timer until a component registers. Its interval is
 * `LIFELINE_HEALTH_INTERVAL_MS` when set, else 15 000 ms, read when first needed (the first
 * registration, or lifeline's start): importing lifeline reads no setting, and an invalid value
 * throws there, naming the variable.
 *
 * @example
 * ```ts
 * import { health } from 'otel-lifeline';
 *
 * const poller = health.registerLiveness('poller');
 * ```
 */
export const health = processCatalog(() => healthIntervalFromEnv());

/**
 * Answers gRPC's standard health protocol (`grpc.health.v1.Health`, `Check` and `Watch`) on the
 * app's grpc-js `server` from the catalog's verdicts (default the process-wide `health`), so
 * Kubernetes' native gRPC probes (`grpc: { port, service }`) work: service `""` (or `"live"`) is
 * liveness, `"ready"` readiness, `"startup"` the startup probe (`GRPC_HEALTH_SERVICES`); any other
 * name is `NOT_FOUND` to `Check` and `SERVICE_UNKNOWN` to `Watch`, whose stream sends the status at
 * once and then each change. Register mode adds it to every grpc-js server the app binds, unless
 * the app adds a health service of its own (`LIFELINE_GRPC_HEALTH=off` to never add it). Returns
 * the function that removes it.
 *
 * @example
 * ```ts
 * import { Server, ServerCredentials } from '@grpc/grpc-js';
 * import { addGrpcHealthService } from 'otel-lifeline';
 *
 * const server = new Server();
 * addGrpcHealthService(server); // in the pod: livenessProbe: { grpc: { port: 50051 } }
 * server.bindAsync('0.0.0.0:50051', ServerCredentials.createInsecure(), () => undefined);
 * ```
 */
export function addGrpcHealthService(server: GrpcServerLike, options: { health?: HealthCatalog } = {}): () => void {
  return serveGrpcHealth(server, options.health ?? health);
}
