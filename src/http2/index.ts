export { installHttp2Deadlines, type InstalledHttp2Deadlines } from './http2-deadlines.js';
