// (b) The same service, with its poller registered as a liveness component: each iteration runs
// in tick.run, so it is traced as `tick poller` and every fetch below it is bounded by the tick's
// deadline. A blackholed upstream now makes the poll fail fast; the component keeps taking ticks
// and liveness stays green.
//
//   LIFELINE_HEALTH_INTERVAL_MS=1000 node --import otel-lifeline/register examples/ticked-poller/server.mjs
import { createServer } from 'node:http';
import { health, isDeadlineExceeded } from 'otel-lifeline';
import { pino } from 'pino';

const log = pino({ name: 'ticked-poller' });
const upstream = process.env.UPSTREAM_URL ?? 'http://127.0.0.1:8081/status';
let last = { at: null, body: null, error: null };

async function poll() {
  try {
    const response = await fetch(upstream);
    last = { at: new Date().toISOString(), body: await response.text(), error: null };
    log.info({ status: response.status }, 'polled upstream'); // carries trace_id: inside the tick
  } catch (error) {
    last = { at: new Date().toISOString(), body: null, error: isDeadlineExceeded(error) ? 'deadline exceeded' : String(error.message) };
    log.warn({ err: last.error }, 'poll failed');
  }
}

const poller = health.registerLiveness('poller');
(async () => {
  for await (const tick of poller) await tick.run(poll);
})();

const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(last)));
server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
