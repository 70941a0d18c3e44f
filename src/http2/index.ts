export { installHttp2Deadlines } from './http2-deadlines.js';
