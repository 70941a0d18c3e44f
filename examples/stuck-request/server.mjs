// A service that knows nothing of lifeline and registers no component, run as most people will:
//
//   node --import otel-lifeline/register examples/stuck-request/server.mjs
//
// GET /orders/:id asks a stock service over a raw TCP socket that never answers (no client lifeline
// bounds); the request hangs. With no component there is no verdict, yet lifeline exports the stuck
// request while it is stuck: in Jaeger, Tags lifeline.in_flight=true lists
// `GET (in flight, 12 s, no deadline)`, or `… past deadline` when the caller sent x-request-timeout-ms.
import { createServer as createTcpServer, connect } from 'node:net';
import { createServer } from 'node:http';

// The stock service: accepts, reads, never answers.
const stock = createTcpServer((socket) => socket.resume());
await new Promise((resolve) => stock.listen(0, '127.0.0.1', resolve));

function askStock(orderId) {
  return new Promise((resolve, reject) => {
    const socket = connect(stock.address().port, '127.0.0.1', () => socket.write(`STOCK ${orderId}\n`));
    socket.once('data', (data) => {
      socket.end();
      resolve(String(data));
    });
    socket.once('error', reject);
  });
}

const server = createServer((req, res) => {
  const order = /^\/orders\/(\w+)$/.exec(req.url ?? '');
  if (order === null) return void res.end('ok');
  askStock(order[1]).then(
    (answer) => res.end(answer),
    (err) => res.writeHead(502).end(err.message),
  );
});
server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
