// One probe server for bench/probe-servers, in a process of its own, all in the same state: one
// component, live and ready. KIND = lifeline | lightship | terminus. Prints {"port":N,"path":P}.
import { createServer } from 'node:http';

const kind = process.env.KIND;
if (kind === 'lifeline') {
  const { HealthCatalog, startProbeServer } = await import('otel-lifeline');
  const health = new HealthCatalog({ interval: 3_600_000 });
  health.registerLiveness('worker').take();
  health.runRound();
  // The server's own throughput, its abuse limits lifted: the request budget (1,000/s by default, see
  // bench/probe-flood) would cap it, closing a keep-alive connection every 100 requests would
  // measure autocannon's reconnects (p50 ~20 ms here) rather than the answers, and autocannon's 32
  // connections from one address would be 16 past the per-address cap (overflow connections: one
  // answer each, then a reconnect; p99 3.4 s in the run of 2026-12-06 21:06, before this was lifted).
  const probe = await startProbeServer({
    health,
    port: 0,
    maxRequestsPerSecond: 1e9,
    maxRequestsPerConnection: 1e9,
    maxConnectionsPerAddress: 64,
  });
  report(probe.port);
} else if (kind === 'lightship') {
  const { createLightship } = await import('lightship');
  const lightship = await createLightship({ detectKubernetes: false, port: 0, signals: [] });
  lightship.signalReady();
  report(lightship.server.address().port);
} else if (kind === 'terminus') {
  const { createTerminus } = await import('@godaddy/terminus');
  const server = createServer((_req, res) => res.end('app'));
  createTerminus(server, { healthChecks: { '/live': async () => ({ worker: 'ok' }) }, signals: [] });
  server.listen(0, '127.0.0.1', () => report(server.address().port));
} else if (kind === 'bare node:http') {
  // The floor of any node:http server: a fixed answer, no routing, no limits.
  const body = Buffer.from('{"status":"pass"}');
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.byteLength });
    res.end(body);
  });
  server.keepAliveTimeout = 5_000;
  server.listen(0, '127.0.0.1', () => report(server.address().port));
} else {
  throw new Error(`unknown KIND ${kind}`);
}

function report(port) {
  process.stdout.write(`${JSON.stringify({ port, path: '/live' })}\n`);
  setInterval(() => undefined, 60_000); // lifeline's probe socket is unref-ed: stay up until killed
}
