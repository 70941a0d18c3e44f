// The benchmarks' peer: a plain HTTP server in its own process (so it does not share the client's
// event loop). MODE=ok answers "ok"; MODE=silent accepts and never answers. Prints {"port":N}.
import { createServer } from 'node:http';

const silent = process.env.MODE === 'silent';
const server = createServer((_req, res) => {
  if (!silent) res.end('ok');
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
