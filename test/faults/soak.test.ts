import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/node.js';
import { createTestHost, type TestHost } from '../support/netns.js';

// A bounded soak: ticks every 500 ms, a dependency call per tick, and the dependency blackholed for
// 20 s of every 40 s. Heap, RSS and active handles are sampled every 5 s: they must stay flat.
const SOAK_MS = Number(process.env.SOAK_SECONDS ?? 600) * 1_000;
const DEP_PORT = 18_081;
const STATS_PORT = 18_082;
const PROBE_PORT = 5_557;

let host: TestHost;
let dependency: Server;
let service: ChildProcess;
const calls: { outcome: string }[] = [];
const blocks: string[] = [];

beforeAll(async () => {
  host = createTestHost();
  dependency = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => dependency.listen(DEP_PORT, host.localIp, resolve));
  service = host.spawn(
    process.execPath,
    ['--expose-gc', '--import', 'otel-lifeline/register', `${ROOT}/test/fixtures/blackhole-service.mjs`],
    {
      DEP_URL: `http://${host.localIp}:${DEP_PORT}/status`,
      STATS_PORT: String(STATS_PORT),
      LIFELINE_HEALTH_INTERVAL_MS: '500',
      LIFELINE_PROBE_HOST: '0.0.0.0',
      LIFELINE_PROBE_PORT: String(PROBE_PORT),
      LIFELINE_LOG_LEVEL: 'warn',
      OTEL_TRACES_EXPORTER: 'none',
    },
  );
  // The service's call lines; lifeline's own log lines (a warning, JSON too) go to the same stdout.
  createInterface({ input: service.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    const parsed = JSON.parse(line) as { outcome?: string };
    if (parsed.outcome !== undefined) calls.push({ outcome: parsed.outcome });
  });
  // The watchdog (threshold 500 ms here) logs every block it sees: a healthy loop has none.
  createInterface({ input: service.stderr as NodeJS.ReadableStream }).on('line', (line) => {
    if (line.includes('lifeline: event loop blocked')) blocks.push(line);
  });
  await new Promise((resolve) => setTimeout(resolve, 3_000));
});
afterAll(async () => {
  service.kill('SIGKILL');
  dependency.closeAllConnections();
  await new Promise((resolve) => dependency.close(resolve));
  host.destroy();
});

interface Stats {
  heapUsed: number;
  rss: number;
  resources: Record<string, number>;
}

const median = (values: number[]) => values.slice().sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

describe(`soak: ${SOAK_MS / 1_000} s of ticks, calls and blackholes`, { timeout: SOAK_MS + 60_000 }, () => {
  it('heap, RSS and handles stay flat; liveness stays green', async () => {
    const samples: (Stats & { at: number })[] = [];
    let notOk = 0;
    let probes = 0;
    let blackholed = false;
    const started = Date.now();
    try {
      while (Date.now() - started < SOAK_MS) {
        const inFault = (Date.now() - started) % 40_000 >= 20_000;
        if (inFault !== blackholed) {
          if (inFault) host.blackholeTo(host.localIp, DEP_PORT);
          else host.liftTo(host.localIp, DEP_PORT);
          blackholed = inFault;
        }
        for (let i = 0; i < 10; i++) {
          probes++;
          const status = await fetch(`http://${host.ip}:${PROBE_PORT}/live`, { signal: AbortSignal.timeout(1_000) }).then(
            (r) => r.status,
            () => 0,
          );
          if (status !== 200) notOk++;
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
        samples.push({ at: Date.now() - started, ...((await (await fetch(`http://${host.ip}:${STATS_PORT}/`)).json()) as Stats) });
      }
    } finally {
      if (blackholed) host.liftTo(host.localIp, DEP_PORT);
    }
    const fifth = Math.max(2, Math.floor(samples.length / 5));
    const first = samples.slice(1, 1 + fifth); // the first sample still warms up
    const last = samples.slice(-fifth);
    const handles = (s: Stats) => Object.values(s.resources).reduce((a, b) => a + b, 0);
    const heapGrowthMb = (median(last.map((s) => s.heapUsed)) - median(first.map((s) => s.heapUsed))) / 2 ** 20;
    const rssGrowthMb = (median(last.map((s) => s.rss)) - median(first.map((s) => s.rss))) / 2 ** 20;
    const handleGrowth = Math.max(...last.map(handles)) - Math.max(...first.map(handles));
    const outcomes = calls.reduce<Record<string, number>>((acc, c) => ({ ...acc, [c.outcome]: (acc[c.outcome] ?? 0) + 1 }), {});
    console.log(
      `soak ${SOAK_MS / 1_000} s: ${probes} liveness probes, ${notOk} not 200; ${calls.length} calls ${JSON.stringify(outcomes)}; heap median first→last fifth ${(median(first.map((s) => s.heapUsed)) / 2 ** 20).toFixed(1)}→${(median(last.map((s) => s.heapUsed)) / 2 ** 20).toFixed(1)} MB, RSS ${rssGrowthMb.toFixed(1)} MB growth, handles ${Math.max(...first.map(handles))}→${Math.max(...last.map(handles))}; event-loop blocks reported by the watchdog: ${String(blocks.length)}${blocks.length === 0 ? '' : ` (${blocks.join(' | ')})`}`,
    );
    expect(notOk).toBe(0);
    expect(outcomes.deadline ?? 0).toBeGreaterThan(0);
    expect(outcomes.ok ?? 0).toBeGreaterThan(0);
    expect(heapGrowthMb).toBeLessThan(5);
    expect(rssGrowthMb).toBeLessThan(20);
    expect(handleGrowth).toBeLessThanOrEqual(4);
  });
});
