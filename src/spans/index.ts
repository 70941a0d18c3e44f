export { spanHeapBytes } from './heap-bytes.js';
