export * from './names.js';
export { isoTime } from './iso-time.js';
export { scopeTracer } from './scope-tracer.js';
