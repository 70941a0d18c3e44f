export { isLoopback, startProbeServer, type ProbeServer, type ProbeServerOptions } from './probe-server.js';
