// (c) A service with a stuck dependency: the dependency accepts requests and never answers.
// - `poller` (liveness) calls it with fetch, `reporter` (liveness) with node:http, each inside
//   tick.run: every call is ended at the tick deadline (error.type=timeout,
//   lifeline.deadline.exceeded=true) and both components stay healthy.
// - `indexer` (liveness) waits for a lock that a crashed job never released: no deadline can end
//   a promise that never settles, so it stops taking ticks, turns unhealthy, and lifeline exports
//   a `health verdict: indexer` with the diagnostic (the in-flight span, the function that waits, the
//   sockets) and `(in flight)` snapshot spans.
//
//   LIFELINE_HEALTH_INTERVAL_MS=1000 node --import otel-lifeline/register examples/stuck-dependency/server.mjs
import { createServer, get } from 'node:http';
import { trace } from '@opentelemetry/api';
import { health } from 'otel-lifeline';

// The dependency, in this process for a self-contained example: it never answers.
const dependency = createServer(() => undefined);
await new Promise((resolve) => dependency.listen(0, '127.0.0.1', resolve));
const dependencyUrl = `http://127.0.0.1:${dependency.address().port}`;

async function pollInventory() {
  try {
    await (await fetch(`${dependencyUrl}/inventory?token=s3cr3t-token`)).text();
  } catch {
    // ended at the tick deadline: the next tick tries again
  }
}

function sendReport() {
  return new Promise((resolve) => {
    get(`${dependencyUrl}/report`, (res) => res.resume().on('end', resolve)).on('error', resolve); // ended at the tick deadline
  });
}

// A lock whose holder went away without releasing it: waiting on it never ends.
const indexLock = { held: true, waiters: [] };
function acquireIndexLock() {
  return indexLock.held ? new Promise((resolve) => indexLock.waiters.push(resolve)) : Promise.resolve();
}
function rebuildIndex() {
  return trace.getTracer('stuck-dependency').startActiveSpan('wait for index lock', async (span) => {
    await acquireIndexLock(); // never returns
    span.end();
  });
}

for (const [name, work] of [
  ['poller', pollInventory],
  ['reporter', sendReport],
  ['indexer', rebuildIndex],
]) {
  const component = health.registerLiveness(name);
  (async () => {
    for await (const tick of component) await tick.run(work);
  })();
}

const server = createServer((_req, res) => res.end('ok'));
server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port, dependency: dependencyUrl }));
});
