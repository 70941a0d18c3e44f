export {
  Health,
  PROBE_KINDS,
  processCatalog,
  useDiagnostics,
  type HealthOptions,
  type EventLoopStatus,
  type HealthStatus,
  SELF_COMPONENT,
  type ProbeKind,
  type RegisterOptions,
} from './catalog.js';
export { ComponentHandle, type ComponentReport } from './component.js';
export { Tick, type ComponentProbe } from './tick.js';
