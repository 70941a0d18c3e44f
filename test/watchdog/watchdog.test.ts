import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { blockingLine } from '../support/blocking.js';
import { freePort, ROOT, runNode } from '../support/node.js';
import { otlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { startService, type ChildService } from '../support/service.js';

// Services under register mode that block their own event loop, exporting to a real OTLP receiver.
const THRESHOLD_MS = 300;
const BLOCK_MS = 1_500;
// Bounds for what a service does under two CPU burners per core, where it gets a fraction of one:
// starting up, burning a block's CPU, exporting its spans. Waits end on the event, these only bound them.
const EVENT_MS = 45_000;
const TEST_MS = 2 * EVENT_MS;
const cleanup: (() => Promise<unknown> | undefined)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function blockingService(
  script: string,
  env: NodeJS.ProcessEnv,
  nodeArgs: string[] = [],
): Promise<{
  app: ChildService;
  blocks: () => ReceivedSpan[];
  waitFor: (n: number, what: (s: ReceivedSpan) => boolean) => Promise<ReceivedSpan[]>;
  verdicts: () => ReceivedSpan[];
  verdict: () => Promise<ReceivedSpan | undefined>;
}> {
  const receiver = await otlpReceiver(0);
  const app = await startService(
    script,
    {
      OTEL_SERVICE_NAME: 'blocking',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      LIFELINE_PROBE_PORT: '0',
      LIFELINE_LOG_LEVEL: 'warn',
      LIFELINE_WATCHDOG_THRESHOLD_MS: String(THRESHOLD_MS),
      BLOCK_MS: String(BLOCK_MS),
      ...env,
    },
    [...nodeArgs, '--import', 'otel-lifeline/register'],
  );
  cleanup.push(
    () => receiver.close(),
    () => app.kill('SIGKILL'),
  );
  const blocks = () => receiver.spans.filter((s) => s.name === 'event loop blocked');
  return {
    app,
    blocks,
    waitFor: async (n, what) =>
      (await receiver.waitFor(() => blocks().filter(what).length >= n, EVENT_MS)).filter((s) => s.name === 'event loop blocked' && what(s)),
    verdicts: () => receiver.spans.filter((s) => s.name.startsWith('health verdict')),
    verdict: async () =>
      (await receiver.waitFor((spans) => spans.some((s) => s.name.startsWith('health verdict')), EVENT_MS)).find((s) =>
        s.name.startsWith('health verdict'),
      ),
  };
}

// The app's own blocks: on a loaded machine, loading the SDK itself may take a threshold of CPU,
// a start-up block reported apart (it spends no budget).
const ongoing = (s: ReceivedSpan) =>
  s.attributes['lifeline.event_loop.ongoing'] === true && s.attributes['lifeline.event_loop.startup'] !== true;
const whole = (s: ReceivedSpan) =>
  s.attributes['lifeline.event_loop.ongoing'] === false && s.attributes['lifeline.event_loop.startup'] !== true;
const MJS = join(ROOT, 'test/fixtures/blocking-app.mjs');

// Minutes, as a service runs: a false positive that needs time (a GC of a grown heap) must get it.
const LOAD_MS = Number(process.env.WATCHDOG_LOAD_SECONDS ?? 120) * 1_000;

describe('a healthy loop under load', { timeout: LOAD_MS + 30_000 }, () => {
  it(`is never reported (${String(LOAD_MS / 1_000)} s of HTTP calls, JSON, garbage and major GCs; threshold ${String(THRESHOLD_MS)} ms)`, async () => {
    const { app, blocks } = await blockingService('test/fixtures/healthy-load.mjs', { LOAD_MS: String(LOAD_MS) });
    const until = Date.now() + LOAD_MS + 20_000;
    while (!app.stdout().includes('"requests"') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 200));
    const result = JSON.parse(
      app
        .stdout()
        .split('\n')
        .find((line) => line.includes('"requests"')) ?? '{}',
    ) as { requests: number; maxDelayMs: number; majorGcs: number; maxGcMs: number };
    console.log(
      `healthy load ${String(LOAD_MS / 1_000)} s: ${String(result.requests)} requests, ${String(result.majorGcs)} major GCs (longest pause ${String(result.maxGcMs)} ms), worst event-loop delay ${String(result.maxDelayMs)} ms, ${String(blocks().length)} blocks reported`,
    );
    // Load that ran throughout (a request a second even when the machine hands it a sliver of a
    // core), not a throughput: the claim is that none of it was reported.
    expect(result.requests).toBeGreaterThanOrEqual(LOAD_MS / 1_000);
    expect(result.majorGcs).toBeGreaterThan(0);
    expect(blocks()).toEqual([]);
    expect(app.stdout()).not.toContain('event loop blocked');
  });
});

describe('a blocked event loop explains itself: the watchdog thread exports the blocked stack', { timeout: TEST_MS }, () => {
  it.each([
    ['busy', 'a synchronous loop', 'crunchReport'],
    ['regex', 'a catastrophic regular expression', 'matchHeader'],
    ['atomics', 'Atomics.wait', 'waitForLock'],
  ])(
    '%s (%s): a span at once with the top frame, then one with the whole block, linked to the trace it blocked',
    async (block, _what, fn) => {
      const { app, waitFor, verdicts } = await blockingService('test/fixtures/blocking-app.mjs', { BLOCK: block, REGEX_LENGTH: '25' });
      const [detected] = await waitFor(1, ongoing);
      const [ended] = await waitFor(1, whole);
      for (const span of [detected, ended]) {
        expect(span?.statusCode).toBe(2); // ERROR
        expect(span?.attributes['code.function.name']).toBe(fn);
        expect(span?.attributes['code.file.path']).toBe(MJS);
        expect(span?.attributes['code.line.number']).toBe(blockingLine(MJS, fn));
        expect(span?.attributes['lifeline.event_loop.native']).toBe(false);
        expect(span?.statusMessage).toMatch(new RegExp(`blocked for \\d+\\.\\d s in ${fn} \\(${MJS.replace(/[.]/g, '\\.')}:\\d+\\)`));
        expect(span?.events[0]?.attributes['code.stacktrace']).toContain(`at ${fn} (${MJS}:`);
      }
      expect(Number(detected?.attributes['lifeline.event_loop.blocked_ms'])).toBeGreaterThanOrEqual(THRESHOLD_MS);
      // The app's own record of the block: its span's trace is the one the watchdog links to.
      const appLine = JSON.parse(
        app
          .stdout()
          .split('\n')
          .find((line) => line.includes('"traceId"')) ?? '{}',
      ) as { blockedMs: number; traceId: string };
      expect(Number(ended?.attributes['lifeline.event_loop.blocked_ms'])).toBeGreaterThanOrEqual(appLine.blockedMs - 50);
      expect(detected?.links.map((l) => l.traceId)).toContain(appLine.traceId);
      expect(ended?.links.map((l) => l.spanId)).toContain(detected?.spanId);
      // And the main thread says it once the loop runs again.
      const said = new RegExp(`"msg":"lifeline: event loop blocked for \\d+\\.\\d s in ${fn} `);
      const until = Date.now() + EVENT_MS;
      while (!said.test(app.stdout()) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(app.stdout()).toMatch(said);
      // Far shorter than two intervals (15 s each): no probe failed, so there is no verdict to record.
      expect(verdicts()).toEqual([]);
    },
  );

  it('with an inspector open (a debugger may hold a breakpoint), the thread is not paused nor resumed: the block is reported without frames', async () => {
    const { app, waitFor } = await blockingService('test/fixtures/blocking-app.mjs', { BLOCK: 'busy' }, ['--inspect=127.0.0.1:0']);
    const [detected] = await waitFor(1, ongoing);
    const [ended] = await waitFor(1, whole);
    for (const span of [detected, ended]) {
      expect(span?.statusMessage).toMatch(/^event loop (was )?blocked for \d+\.\d s \(stack not read: an inspector is open\)$/);
      expect(span?.attributes['code.function.name']).toBeUndefined();
      expect(span?.attributes['lifeline.event_loop.native']).toBe(false);
    }
    expect(app.stderr()).toContain('Debugger listening on ws://127.0.0.1:');
  });

  it.each([
    ['exec', 'execSync', 'runReportTool'],
    ['fs', 'a sync read of a pipe', 'readSpool'],
  ])('outside JavaScript (%s: %s): exported at once with the kernel wait, then the caller of the native call', async (block, _what, fn) => {
    const { waitFor } = await blockingService('test/fixtures/blocking-app.mjs', { BLOCK: block });
    const [detected] = await waitFor(1, ongoing);
    expect(detected?.attributes['lifeline.event_loop.native']).toBe(true);
    expect(detected?.attributes['code.function.name']).toBeUndefined();
    expect(detected?.statusMessage).toMatch(/blocked for \d+\.\d s outside JavaScript/);
    expect(detected?.attributes['lifeline.event_loop.wait']).toMatch(/\(syscall \d+\)$/);
    const [ended] = await waitFor(1, whole);
    expect(ended?.attributes['code.function.name']).toBe(fn);
    expect(ended?.attributes['code.line.number']).toBe(blockingLine(MJS, fn));
  });

  it('blocked until killed: the evidence is exported before the process dies', async () => {
    const { app, waitFor, blocks } = await blockingService('test/fixtures/blocking-app.mjs', { BLOCK: 'forever' });
    const [detected] = await waitFor(1, ongoing);
    // As the kubelet ends it after the grace period: a SIGTERM handler cannot run on a blocked loop.
    await app.kill('SIGKILL');
    expect(detected?.attributes['code.function.name']).toBe('spinForever');
    expect(blocks().filter(whole)).toEqual([]);
  });

  it('CommonJS apps, and TypeScript compiled with source maps (frames point into the .ts file)', async () => {
    const cjs = join(ROOT, 'test/fixtures/blocking-app.cjs');
    const { waitFor } = await blockingService('test/fixtures/blocking-app.cjs', {});
    const [fromCjs] = await waitFor(1, ongoing);
    expect([
      fromCjs?.attributes['code.function.name'],
      fromCjs?.attributes['code.file.path'],
      fromCjs?.attributes['code.line.number'],
    ]).toEqual(['scoreAll', cjs, blockingLine(cjs, 'scoreAll')]);

    const dir = mkdtempSync(join(tmpdir(), 'lifeline-ts-'));
    cleanup.push(() => {
      rmSync(dir, { recursive: true, force: true });
      return undefined;
    });
    const ts = join(ROOT, 'test/fixtures/blocking-app.ts');
    execFileSync(
      process.execPath,
      [
        join(ROOT, 'node_modules/typescript/bin/tsc'),
        '--ignoreConfig',
        '--sourceMap',
        '--target',
        'es2022',
        '--module',
        'nodenext',
        '--types',
        'node',
        '--outDir',
        dir,
        ts,
      ],
      { cwd: ROOT },
    );
    const compiled = await blockingService(join(dir, 'blocking-app.js'), {}, ['--enable-source-maps']);
    const [fromTs] = await compiled.waitFor(1, ongoing);
    expect([
      fromTs?.attributes['code.function.name'],
      fromTs?.attributes['code.file.path'],
      fromTs?.attributes['code.line.number'],
    ]).toEqual(['crunchReport', ts, blockingLine(ts, 'crunchReport')]);
  });

  it('reports at most one block per minute; the next one is only logged by the main thread', async () => {
    const { app, blocks, waitFor } = await blockingService('test/fixtures/blocking-app.mjs', {
      BLOCK: 'busy',
      BLOCK_MS: '600',
      BLOCK_TIMES: '2',
      BLOCK_EVERY_MS: '1500',
    });
    await waitFor(1, whole);
    const until = Date.now() + EVENT_MS;
    while (
      app
        .stdout()
        .split('\n')
        .filter((line) => line.includes('"traceId"')).length < 2 &&
      Date.now() < until
    )
      await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 500)); // what a second report would need to arrive
    expect(
      app
        .stdout()
        .split('\n')
        .filter((line) => line.includes('"traceId"')),
    ).toHaveLength(2);
    expect(blocks().filter(ongoing)).toHaveLength(1);
    const said = app
      .stdout()
      .split('\n')
      .filter((line) => line.includes('lifeline: event loop blocked for'));
    expect(
      said
        .map((line) => JSON.parse(line) as { exported: boolean; startup?: boolean })
        .filter((line) => line.startup !== true)
        .map((line) => line.exported),
    ).toEqual([true, false]);
  });
});

describe('probes that still answer: the watchdog thread serves them', { timeout: TEST_MS }, () => {
  it('a loop blocked past two intervals: /live and /ready answer 503 with where; /startup 200; the CLI says it; 200 again after; a shorter block fails no probe', async () => {
    const port = await freePort();
    // Probes fail after two intervals of the loop's own time (2 s): its 0.3 s threshold is 1.7 s of
    // CPU before that, and a block of 6 s of CPU leaves 4 s for the probes and the CLI to see it
    // failing, however slowly a loaded machine hands CPU out.
    const INTERVAL_MS = 1_000;
    const {
      app,
      waitFor,
      verdict: verdict_,
    } = await blockingService('test/fixtures/blocking-app.mjs', {
      BLOCK: 'busy',
      BLOCK_MS: '6000',
      BLOCK_AFTER_MS: '3000',
      LIFELINE_PROBE_PORT: String(port),
      LIFELINE_HEALTH_INTERVAL_MS: String(INTERVAL_MS),
    });
    const get = async (probe: string) => {
      const res = await fetch(`http://127.0.0.1:${String(port)}/${probe}`, { signal: AbortSignal.timeout(1_000) });
      return {
        status: res.status,
        body: (await res.json()) as { unhealthy: string[]; eventLoop?: { blockedMs: number; blockedIn?: string; frames?: string[] } },
      };
    };
    // Reported at the threshold (300 ms), well before the catalog's own check would fail (2 s):
    // the probes still answer as the catalog would have, 200.
    await waitFor(1, ongoing);
    let live = await get('live');
    expect(live).toEqual({ status: 200, body: { status: 'pass', healthy: ['healthcheck'], unhealthy: [] } });
    const until = Date.now() + EVENT_MS;
    // 503 from two intervals on, with the frames the inspector read at the threshold.
    // Paced like a prober: the probe server's request budget cuts off a client that floods it.
    const poll = async () => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return get('live');
    };
    while (live.body.eventLoop?.blockedIn === undefined && Date.now() < until) live = await poll();
    expect(live.status).toBe(503);
    expect(live.body.unhealthy).toContain('healthcheck');
    expect(live.body.eventLoop?.blockedMs).toBeGreaterThanOrEqual(2 * INTERVAL_MS);
    expect(live.body.eventLoop?.blockedIn).toBe(`crunchReport (${MJS}:${String(blockingLine(MJS, 'crunchReport'))})`);
    expect(live.body.eventLoop?.frames?.[0]).toMatch(new RegExp(`^crunchReport \\(${MJS.replace(/[.]/g, '\\.')}:\\d+:\\d+\\)$`));
    expect((await get('ready')).status).toBe(503);
    expect((await get('startup')).status).toBe(200);
    const cli = await runNode(['dist/cli/main.js', 'health', '--url', `http://127.0.0.1:${String(port)}`, '--probe', 'live'], {
      env: { ...process.env, NO_COLOR: '1' },
    });
    expect(cli.code).toBe(1);
    expect(cli.stdout).toMatch(new RegExp(`event loop blocked for \\d+\\.\\d s in crunchReport \\(${MJS.replace(/[.]/g, '\\.')}:\\d+\\)`));
    while (!app.stdout().includes('"traceId"') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    const after = Date.now() + EVENT_MS;
    while (live.status !== 200 && Date.now() < after) live = await poll();
    expect(live).toEqual({ status: 200, body: { status: 'pass', healthy: ['healthcheck'], unhealthy: [] } });
    // Back on the main thread, the verdict the probes gave meanwhile is recorded, linked to the watchdog's span.
    const verdict = await verdict_();
    const [detected] = await waitFor(1, ongoing);
    const unhealthy = JSON.parse(String(verdict?.attributes['lifeline.health.unhealthy'])) as { values: { stringValue: string }[] };
    expect(unhealthy.values.map((v) => v.stringValue)).toEqual(['healthcheck']);
    expect(Number(verdict?.attributes['lifeline.event_loop.blocked_ms'])).toBeGreaterThanOrEqual(2 * INTERVAL_MS);
    expect(verdict?.attributes['lifeline.event_loop.blocked_in']).toBe(
      `crunchReport (${MJS}:${String(blockingLine(MJS, 'crunchReport'))})`,
    );
    expect(verdict?.statusMessage).toMatch(/^unhealthy: healthcheck \(event loop blocked for \d+\.\d s in crunchReport \(/);
    expect(verdict?.links.map((l) => l.spanId)).toContain(detected?.spanId);
  });
});
