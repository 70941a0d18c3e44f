// (a) An ordinary Node HTTP service that knows nothing of lifeline: it polls an upstream with
// fetch every POLL_MS and serves the last answer. Run it unmodified under lifeline:
//
//   node --import otel-lifeline/register examples/plain-service/server.mjs
//
// Its fetch calls become client spans; with no deadline anywhere they carry
// lifeline.deadline.missing=true: the calls nobody bounded (set LIFELINE_DEFAULT_TIMEOUT_MS).
import { createServer } from 'node:http';

const upstream = process.env.UPSTREAM_URL ?? 'http://127.0.0.1:8081/status';
const pollMs = Number(process.env.POLL_MS ?? 1_000);
let last = { at: null, body: null, error: null };

async function poll() {
  try {
    const response = await fetch(upstream);
    last = { at: new Date().toISOString(), body: await response.text(), error: null };
  } catch (error) {
    last = { at: new Date().toISOString(), body: null, error: String(error.cause?.code ?? error.message) };
  }
}
setInterval(poll, pollMs);

const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(last)));
server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
