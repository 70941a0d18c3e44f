export { DeadlineSpanProcessor } from './deadline-span-processor.js';
// For lifeline's SDK wiring (a deadline set after a client span started); not re-exported by the package.
export { recordDeadline } from './deadline-span-processor.js';
