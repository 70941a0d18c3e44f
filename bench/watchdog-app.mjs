// The service of bench/watchdog, run under `--import otel-lifeline/register` (LIFELINE_WATCHDOG on
// or off): a liveness component ticking (the default interval), and 8 keep-alive fetch loops to UPSTREAM for
// DURATION_MS, after IDLE_MS of doing nothing. Prints {"requests":N,"rssMb":M,"ticks":T,"idleCpuMs":I,
// "loadCpuMs":L} (RSS measured before the load; CPU of every thread of the process, idle and under load).
import { health } from 'otel-lifeline';

const poller = health.registerLiveness('poller');
let ticks = 0;
void (async () => {
  for await (const tick of poller) await tick.run(() => void ticks++);
})();
await new Promise((resolve) => setTimeout(resolve, 500)); // started, threads up
const rssMb = process.memoryUsage().rss / 2 ** 20;
const cpuMs = (since) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1_000;
};
const idleFrom = process.cpuUsage();
await new Promise((resolve) => setTimeout(resolve, Number(process.env.IDLE_MS ?? 0)));
const idleCpuMs = cpuMs(idleFrom);
const loadFrom = process.cpuUsage();
const until = performance.now() + Number(process.env.DURATION_MS ?? 5_000);
let requests = 0;
await Promise.all(
  Array.from({ length: 8 }, async () => {
    while (performance.now() < until) {
      await (await fetch(process.env.UPSTREAM)).text();
      requests++;
    }
  }),
);
console.log(JSON.stringify({ requests, rssMb, ticks, idleCpuMs, loadCpuMs: cpuMs(loadFrom) }));
process.exit(0);
