// (c) A service with a stuck dependency: the dependency accepts requests and never answers.
// - `poller` (liveness) calls it with fetch inside tick.run: every call is aborted at the tick
//   deadline (error.type=timeout, lifeline.deadline.exceeded=true) and poller stays healthy.
// - `reporter` (liveness) calls it with node:http, which no deadline reaches: it hangs, stops
//   taking ticks, turns unhealthy, and lifeline exports a `health verdict` with the diagnostic
//   (the in-flight GET, the function that made it, the socket) and `(in flight)` snapshot spans.
//
//   LIFELINE_HEALTH_INTERVAL_MS=1000 node --import lifeline/register examples/stuck-dependency/server.mjs
import { createServer, get } from 'node:http';
import { health } from 'lifeline';

// The dependency, in this process for a self-contained example: it never answers.
const dependency = createServer(() => undefined);
await new Promise((resolve) => dependency.listen(0, '127.0.0.1', resolve));
const dependencyUrl = `http://127.0.0.1:${dependency.address().port}`;

async function pollInventory() {
  try {
    await (await fetch(`${dependencyUrl}/inventory?token=s3cr3t-token`)).text();
  } catch {
    // aborted at the tick deadline: the next tick tries again
  }
}

function sendReport() {
  return new Promise((resolve, reject) => {
    get(`${dependencyUrl}/report`, (res) => res.resume().on('end', resolve)).on('error', reject);
  });
}

const poller = health.registerLiveness('poller');
(async () => {
  for await (const tick of poller) await tick.run(pollInventory);
})();

const reporter = health.registerLiveness('reporter');
(async () => {
  for await (const tick of reporter) await tick.run(sendReport); // never returns
})();

const server = createServer((_req, res) => res.end('ok'));
server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port, dependency: dependencyUrl }));
});
