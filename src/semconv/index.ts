export * from './attributes.js';
export { isoTime } from './iso-time.js';
