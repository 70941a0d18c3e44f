// How a process ends under lifeline: signals and crashes (process-ending.ts), and the app's own
// HTTP servers drained before the last flush (app-servers.ts). lifeline's SDK wiring uses both.
export { watchEnding } from './process-ending.js';
export { trackHttpServers, type TrackedServers } from './app-servers.js';
