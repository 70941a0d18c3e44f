// The service of the start-up benchmark: an ES module HTTP server that answers with its own RSS
// and CPU time. bench/startup.ts starts it under each loader and times it until it answers.
import { createServer } from 'node:http';

const server = createServer((_req, res) => {
  const cpu = process.cpuUsage();
  res.end(JSON.stringify({ rss: process.memoryUsage().rss, cpuMs: (cpu.user + cpu.system) / 1_000 }));
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`);
});
