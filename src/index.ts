/**
 * lifeline: liveness probes that stay honest and deadlines that reach every remote call,
 * on OpenTelemetry. This entry depends on `@opentelemetry/api` only and changes no global on import.
 * @packageDocumentation
 */
import { Health } from './health/index.js';

export { LifelineError, type LifelineErrorCode } from './errors/index.js';
export {
  DeadlineExceededError,
  currentDeadline,
  isDeadlineExceeded,
  withDeadline,
  withTimeout,
  type Deadline,
  type DeadlineSource,
} from './deadline/index.js';
export {
  ComponentHandle,
  Health,
  Tick,
  type ComponentProbe,
  type HealthOptions,
  type HealthStatus,
  type ProbeKind,
  type RegisterOptions,
} from './health/index.js';
export { startProbeServer, type ProbeServer, type ProbeServerOptions } from './probe/index.js';
export type { Logger } from './log/index.js';

/** The process-wide catalog. It starts no timer until a component registers. */
export const health = new Health();
