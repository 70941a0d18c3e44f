/**
 * bench/debug-diagnostics: what one GET /debug/diagnostics costs with many open sockets in the
 * process (the handle list is capped at 1,000 active resources; past it only counts are built).
 * Run: npm run bench:debug-diagnostics
 */
import { connect, createServer, type Socket } from 'node:net';
import { HealthCatalog, startProbeServer } from 'otel-lifeline';
import { fixed, summarize, table } from './support.ts';

const quick = process.env.BENCH_QUICK === '1';
const CONNECTIONS = quick ? [500, 2_500] : [500, 2_500, 5_000]; // two sockets each, both in this process
const CALLS = 7;

const health = new HealthCatalog({ interval: 3_600_000 });
const probe = await startProbeServer({
  health,
  port: 0,
  debugDiagnostics: true,
  logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
});
const accepted: Socket[] = [];
const sink = createServer((socket) => accepted.push(socket));
await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
const sinkPort = (sink.address() as { port: number }).port;
const clients: Socket[] = [];

const rows: string[][] = [];
for (const target of CONNECTIONS) {
  while (clients.length < target) {
    const batch = Array.from(
      { length: Math.min(500, target - clients.length) },
      () => new Promise<void>((resolve) => clients.push(connect(sinkPort, '127.0.0.1', resolve))),
    );
    await Promise.all(batch);
  }
  while (accepted.length < target) await new Promise((resolve) => setTimeout(resolve, 10));
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    const res = await fetch(`http://127.0.0.1:${String(probe.port)}/debug/diagnostics`);
    bytes = (await res.arrayBuffer()).byteLength;
    times.push(performance.now() - started);
  }
  const t = summarize(times);
  rows.push([
    String(process.getActiveResourcesInfo().length),
    `${fixed(t.median, 1)} (${fixed(t.min, 1)}–${fixed(t.max, 1)})`,
    String(bytes),
  ]);
}
console.log(`## GET /debug/diagnostics with many open sockets, ${String(CALLS)} calls each\n`);
table(['active resources', 'ms per call median (min–max)', 'body bytes'], rows);
for (const socket of [...clients, ...accepted]) socket.destroy();
sink.close();
await probe.close();
health.close();
