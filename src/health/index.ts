export {
  Health,
  PROBE_KINDS,
  processCatalog,
  useDiagnostics,
  type HealthOptions,
  type EventLoopStatus,
  type HealthStatus,
  SELF_COMPONENT,
  type RegisterOptions,
} from './catalog.js';
export { ComponentHandle, type ComponentReport } from './component.js';
// eslint-disable-next-line @typescript-eslint/no-deprecated -- the old name, still exported
export { Tick, type ComponentProbe, type ProbeKind } from './tick.js';
