export { Health, type HealthOptions, type HealthStatus, type ProbeKind, type RegisterOptions } from './catalog.js';
export { ComponentHandle } from './component.js';
export { Tick, type ComponentProbe } from './tick.js';
