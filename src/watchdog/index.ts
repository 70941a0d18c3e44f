export { startWatchdog, type EventLoopBlock, type Watchdog, type WatchdogOptions } from './watchdog.js';
export type { BlockedFrame } from './frames.js';
export type { ServedProbeOptions } from './messages.js';
export { cpuStarvation } from './starvation.js';
