import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { blockingLine } from '../support/blocking.js';
import { ROOT } from '../support/node.js';
import { otlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { startService, type ChildService } from '../support/service.js';

// A process starved of CPU (stopped with a real SIGSTOP: its main thread and its watchdog thread
// both stop) is not a blocked event loop; a loop that burns CPU is, however slowly it gets it.
const FIXTURE = join(ROOT, 'test/fixtures/starved-app.mjs');
const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

interface Line {
  msg: string;
  stalledMs?: number;
  starvedMs?: number;
  exported?: boolean;
  startup?: boolean;
  level?: string;
}

async function starvedApp(env: NodeJS.ProcessEnv): Promise<{
  app: ChildService;
  pid: () => number;
  get: (path: string) => Promise<unknown>;
  live: () => Promise<number>;
  lines: () => Line[];
  until: (what: (lines: Line[]) => boolean, timeoutMs?: number) => Promise<Line[]>;
  blocks: () => ReceivedSpan[];
  waitForBlocks: (n: number) => Promise<ReceivedSpan[]>;
}> {
  const receiver = await otlpReceiver(0);
  const app = await startService(FIXTURE, {
    OTEL_SERVICE_NAME: 'starved',
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    LIFELINE_LOG_LEVEL: 'warn',
    ...env,
  });
  cleanup.push(
    () => receiver.close(),
    () => app.kill('SIGKILL'),
  );
  const lines = (): Line[] =>
    app
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Line);
  const blocks = () =>
    receiver.spans.filter((s) => s.name === 'event loop blocked' && s.attributes['lifeline.event_loop.ongoing'] === true);
  return {
    app,
    pid: () => Number(app.first.pid),
    get: async (path) => (await fetch(`${app.url}${path}`, { signal: AbortSignal.timeout(60_000) })).json(),
    live: () =>
      fetch(`http://127.0.0.1:${String(app.first.probes)}/live`, { signal: AbortSignal.timeout(60_000) }).then(
        (r) => r.status,
        () => 0,
      ),
    lines,
    async until(what, timeoutMs = 60_000) {
      const end = Date.now() + timeoutMs;
      while (!what(lines())) {
        if (Date.now() > end) throw new Error(`not said in time; said: ${app.stderr()}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return lines();
    },
    blocks,
    waitForBlocks: async (n) => (await receiver.waitFor(() => blocks().length >= n, 60_000)).filter((s) => blocks().includes(s)),
  };
}

const starvation = (l: Line) => l.msg.includes('the process got no CPU');
const blockLine = (l: Line) => l.msg.startsWith('lifeline: event loop blocked for');
const STOP_MS = 3_000;

// Minutes of margin: on a 2-core machine with other work, the child may get a tenth of a core.
describe('CPU starvation is not a blocked event loop', { timeout: 120_000 }, () => {
  it(`a process stopped (SIGSTOP) for ${String(STOP_MS / 1_000)} s, past the catalog's stall limit: a starvation line and metric, no span, /live 200; a real block after is still reported`, async () => {
    // Threshold 300 ms, catalog interval 1 s (its own healthcheck fails past 2 s of stalled rounds).
    const { pid, get, live, lines, until, blocks, waitForBlocks } = await starvedApp({ INTERVAL_MS: '1000', REPORT_INTERVAL_MS: '0' });
    const before = (await get('/metrics')) as { cpuStarvedSeconds: number }; // a request: the app is serving
    // Its component healthy from the catalog's first round on.
    const healthy = Date.now() + 10_000;
    while ((await live()) !== 200 && Date.now() < healthy) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await live()).toBe(200);
    process.kill(pid(), 'SIGSTOP');
    const stoppedAt = Date.now();
    // Probes asked while it is stopped, as a kubelet's would be: answered once it runs again.
    const during: Promise<number>[] = [];
    while (Date.now() - stoppedAt < STOP_MS) {
      during.push(live());
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    process.kill(pid(), 'SIGCONT');
    const after: number[] = [];
    for (let i = 0; i < 10; i++) {
      after.push(await live());
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await Promise.all(during)).toEqual(during.map(() => 200));
    expect(after).toEqual(after.map(() => 200));
    const said = (await until((all) => all.some((l) => starvation(l) && (l.stalledMs ?? 0) >= STOP_MS - 500))).filter(starvation);
    const stop = said.find((l) => (l.stalledMs ?? 0) >= STOP_MS - 500);
    console.log(`SIGSTOP ${String(STOP_MS)} ms: ${JSON.stringify(stop)}`);
    expect(stop?.starvedMs).toBeGreaterThanOrEqual(STOP_MS - 500);
    const metric = (await get('/metrics')) as { cpuStarvedSeconds: number };
    expect(metric.cpuStarvedSeconds - before.cpuStarvedSeconds).toBeGreaterThanOrEqual((STOP_MS - 500) / 1_000);
    expect(lines().filter(blockLine)).toEqual([]);
    expect(blocks()).toEqual([]);

    // A loop that burns 0.6 s of CPU is blocked, reported with its frame: the only span.
    await get('/block?ms=600');
    const [real] = await waitForBlocks(1);
    expect(real?.attributes['code.function.name']).toBe('crunchReport');
    expect(real?.attributes['code.line.number']).toBe(blockingLine(FIXTURE, 'crunchReport'));
    await until((all) => all.some(blockLine));
    expect(blocks()).toHaveLength(1);
  });

  it('a block while the module loads (start-up) is reported without spending the budget: the real block after it is reported too', async () => {
    // The default budget: one block a minute.
    const { get, until, waitForBlocks } = await starvedApp({ STARTUP_BLOCK_MS: '600' });
    const [startup] = await waitForBlocks(1);
    expect(startup?.attributes['code.function.name']).toBe('loadRules');
    await get('/block?ms=600');
    const [, real] = await waitForBlocks(2);
    expect(real?.attributes['code.function.name']).toBe('crunchReport');
    const said = (await until((all) => all.filter(blockLine).length >= 2)).filter(blockLine);
    // Start-up's block (a compiler, a test runner's transform) is said at debug, the real one at warn.
    expect(said.map((l) => [l.exported, l.startup === true, l.msg.endsWith('during start-up'), l.level])).toEqual([
      [true, true, true, 'debug'],
      [true, false, false, 'warn'],
    ]);
  });
});
