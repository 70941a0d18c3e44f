export { HealthCatalog, PROBE_KINDS, processCatalog, useDiagnostics, SELF_COMPONENT } from './catalog.js';
export type { EventLoopStatus, HealthCatalogOptions, HealthStatus, RegisterOptions } from './catalog-options.js';
// The names before HealthCatalog, still exported until 1.0.
// eslint-disable-next-line @typescript-eslint/no-deprecated
export { Health, type HealthOptions } from './catalog.js';
export { ComponentHandle, type ComponentReport } from './component.js';
// eslint-disable-next-line @typescript-eslint/no-deprecated -- the old name, still exported
export { Tick, type ComponentProbe, type ProbeKind } from './tick.js';
