// The service of bench/probe-flood, in a process of its own: an app server (GET / answers after
// ~0.2 ms of work) and, on the same event loop, a probe server. KIND = lifeline (default limits),
// lifeline-unbounded (no request budget: maxRequestsPerSecond 1e9) or plain (node:http answering
// /live with a fixed JSON body: what any probe server on the app's loop costs). Prints
// {"app":N,"probe":M}.
import { createServer } from 'node:http';

const app = createServer((_req, res) => {
  const until = performance.now() + 0.2;
  while (performance.now() < until); // the app's own work per request
  res.end('app');
});
await new Promise((resolve) => app.listen(0, '127.0.0.1', resolve));

let probePort;
const kind = process.env.KIND;
if (kind === 'plain') {
  const body = JSON.stringify({ status: 'pass', healthy: ['worker'], unhealthy: [] });
  const probe = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  probePort = probe.address().port;
} else {
  const { HealthCatalog, startProbeServer } = await import('otel-lifeline');
  const health = new HealthCatalog({ interval: 3_600_000 });
  health.registerLiveness('worker').take();
  health.runRound();
  const probe = await startProbeServer({ health, port: 0, ...(kind === 'lifeline-unbounded' ? { maxRequestsPerSecond: 1e9 } : {}) });
  probePort = probe.port;
}
process.stdout.write(`${JSON.stringify({ app: app.address().port, probe: probePort })}\n`);
setInterval(() => undefined, 60_000); // stay up until killed
