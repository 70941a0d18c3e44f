import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unsupportedNode } from '../../src/config/index.js';
import { otlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { freePort, runModule, runNode } from '../support/node.js';
import { OLD_NODE_VERSION, oldNode } from '../support/old-node.js';
import { neverAnswers, serve } from '../support/servers.js';
import { startService } from '../support/service.js';

const SERVER = 2;
const CLIENT = 3;
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
beforeAll(async () => {
  receiver = await otlpReceiver();
});
afterAll(async () => {
  await receiver.close();
});

const output = new Map<string, string>();

/** The app's pino line, parsed. */
function logLine(service: string): Record<string, unknown> {
  const line = (output.get(service) ?? '').split('\n').find((l) => l.includes('calling upstream'));
  return JSON.parse(line ?? '{}') as Record<string, unknown>;
}

/**
 * Starts test/fixtures/esm-client-app.mjs under register mode, has it call itself once over HTTP
 * and once over raw TCP, stops it (lifeline flushes on SIGTERM) and returns its spans.
 */
async function spansOfOneCall(service: string, env: NodeJS.ProcessEnv): Promise<ReceivedSpan[]> {
  const app = await startService(
    'test/fixtures/esm-client-app.mjs',
    {
      OTEL_SERVICE_NAME: service,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      LIFELINE_PROBE_PORT: '0',
      ...env,
    },
    ['--import', 'otel-lifeline/register'],
  );
  try {
    for (const path of ['call', 'tcp']) {
      const res = await fetch(`${app.url}/${path}?port=${new URL(app.url).port}`);
      expect(await res.text()).toBe('200');
    }
    await app.stop(); // SIGTERM: lifeline flushes before the process ends
    output.set(service, app.stdout());
    return receiver.spans.filter((s) => s.service === service);
  } finally {
    await app.stop();
  }
}

describe('register mode in a service as it is', () => {
  it('ESM apps: `import { request } from "node:http"` is instrumented; the loader hook lets pino (a CommonJS package imported from ESM) carry trace ids; LIFELINE_ESM_HOOK=off turns only that off', async () => {
    const withHook = await spansOfOneCall('hook-on', {});
    const client = withHook.find((s) => s.kind === CLIENT);
    expect(client?.name).toBe('GET');
    expect(withHook.filter((s) => s.kind === SERVER)).toHaveLength(3); // /call, the call it made, /tcp
    expect(logLine('hook-on')).toMatchObject({ msg: 'calling upstream', trace_id: client?.traceId });
    const without = await spansOfOneCall('hook-off', { LIFELINE_ESM_HOOK: 'off' });
    expect(without.filter((s) => s.kind === CLIENT).map((s) => s.name)).toEqual(['GET']); // builtins need no hook
    expect(logLine('hook-off')).toMatchObject({ msg: 'calling upstream' });
    expect(logLine('hook-off')).not.toHaveProperty('trace_id');
  });

  it("uses the app's @opentelemetry/auto-instrumentations-node when installed, honouring OTEL_NODE_ENABLED_INSTRUMENTATIONS; LIFELINE_AUTO_INSTRUMENTATIONS=off keeps lifeline's own", async () => {
    // dns and net spans come only from the auto-instrumentations (installed in this repository).
    const auto = await spansOfOneCall('auto-on', { LIFELINE_AUTO_INSTRUMENTATIONS: 'on' });
    expect(auto.map((s) => s.name)).toEqual(expect.arrayContaining(['tcp.connect']));
    const onlyHttp = await spansOfOneCall('auto-http-only', {
      LIFELINE_AUTO_INSTRUMENTATIONS: 'on',
      OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http',
    });
    expect(onlyHttp.map((s) => s.name)).not.toContain('tcp.connect');
    expect(onlyHttp.filter((s) => s.kind === CLIENT).map((s) => s.name)).toEqual(['GET']);
    const own = await spansOfOneCall('auto-off', { LIFELINE_AUTO_INSTRUMENTATIONS: 'off' });
    expect(own.map((s) => s.name)).not.toContain('tcp.connect');
  });

  it('a call nothing bounds gets its response headers within LIFELINE_HEADERS_TIMEOUT_MS (60 s unless set)', async () => {
    const silent = await serve(neverAnswers);
    const app = await startService(
      'test/fixtures/esm-client-app.mjs',
      {
        OTEL_SERVICE_NAME: 'headers-bound',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        LIFELINE_PROBE_PORT: '0',
        LIFELINE_HEADERS_TIMEOUT_MS: '500',
      },
      ['--import', 'otel-lifeline/register'],
    );
    try {
      const started = Date.now();
      const res = await fetch(`${app.url}/call?port=${String(silent.port)}`);
      expect(res.status).toBe(502);
      expect(await res.text()).toMatch(/^deadline exceeded \(headers deadline/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(500);
      const spans = await receiver.waitFor((all) => all.some((s) => s.service === 'headers-bound' && s.kind === CLIENT));
      const client = spans.find((s) => s.service === 'headers-bound' && s.kind === CLIENT);
      expect(client?.attributes).toMatchObject({
        'lifeline.deadline.source': 'headers',
        'lifeline.deadline.exceeded': true,
        'error.type': 'timeout',
      });
    } finally {
      await app.stop();
      await silent.close();
    }
  });

  it('a process that ends by itself (a batch job, a test file) exports its spans before it goes', async () => {
    const result = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/batch-job.mjs'], {
      env: {
        ...process.env,
        OTEL_SERVICE_NAME: 'batch-job',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        LIFELINE_PROBE_PORT: '0',
      },
    });
    expect(result.code).toBe(0);
    // The default batch delay is 5 s: a span seen before the process exited was flushed by lifeline.
    expect(result.ms).toBeLessThan(4_000);
    expect(receiver.spans.filter((s) => s.service === 'batch-job').map((s) => s.name)).toEqual(['nightly job']);
  });

  it('an app with a SIGTERM handler of its own flushes with forceFlush() before process.exit', async () => {
    const app = await startService(
      'test/fixtures/own-sigterm-service.mjs',
      {
        OTEL_SERVICE_NAME: 'own-sigterm',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        LIFELINE_PROBE_PORT: '0',
      },
      ['--import', 'otel-lifeline/register'],
    );
    await app.stop(); // SIGTERM; the default batch delay (5 s) has not passed
    expect(receiver.spans.filter((s) => s.service === 'own-sigterm').map((s) => s.name)).toEqual(['last request']);
  });

  it('a busy default probe port: one warning, and the service runs without a probe server', async () => {
    const holder = await holdPort(5555);
    try {
      const result = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
        env: { ...outsideTestRunner(), LIFELINE_PROBE_PORT: '', OTEL_TRACES_EXPORTER: 'none', APP_LIFETIME_MS: '200' },
      });
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('app listening');
      expect(result.stdout.match(/the probe port is held by process \d+ \(\S+\), not by this service instance/g)).toHaveLength(1);
    } finally {
      holder?.close();
    }
  });

  it('in Kubernetes a busy default probe port stops start-up (another process would answer the probes), except in a test runner', async () => {
    const holder = await holdPort(5555);
    try {
      const env = {
        ...outsideTestRunner(), // this test itself runs in a test runner
        LIFELINE_PROBE_PORT: '',
        OTEL_TRACES_EXPORTER: 'none',
        APP_LIFETIME_MS: '200',
        KUBERNETES_SERVICE_HOST: '10.0.0.1',
      };
      const pod = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], { env });
      expect(pod.code).toBe(1);
      expect(pod.stderr).toMatch(/\(EADDRINUSE: held by process \d+ \(node\)\)/);
      const worker = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
        env: { ...env, JEST_WORKER_ID: '2', APP_COUNT_THREADS: '1' },
      });
      expect(worker.code).toBe(0);
      expect(worker.stdout).toContain('the probe port is held by');
      expect(worker.stdout).toContain('worker threads: 1'); // probes are wanted here, and so is the thread that answers them
    } finally {
      holder?.close();
    }
  });

  it("a test runner's processes serve no probes unless a port is chosen: nothing held, nothing said (a stray variable of the same name is no test runner)", async () => {
    const holder = await holdPort(5555);
    try {
      const env = { ...outsideTestRunner(), LIFELINE_PROBE_PORT: '', OTEL_TRACES_EXPORTER: 'none', APP_LIFETIME_MS: '200' };
      for (const runner of [{ JEST_WORKER_ID: '3' }, { NODE_TEST_CONTEXT: 'child-v8' }, { VITEST: 'true', VITEST_WORKER_ID: '1' }]) {
        const worker = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], { env: { ...env, ...runner } });
        expect(worker.code).toBe(0);
        expect(worker.stdout).toContain('app listening');
        expect(worker.stdout + worker.stderr, JSON.stringify(runner)).not.toMatch(/probe/i);
      }
      const stray = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
        env: { ...env, TAP: 'yes-please' },
      });
      expect(stray.stdout).toContain('the probe port is held by'); // it tried to serve probes
    } finally {
      holder?.close();
    }
  });

  it("a test runner's processes that serve no probes run no watchdog thread, unless the environment asks for one", async () => {
    const env = {
      ...outsideTestRunner(),
      LIFELINE_PROBE_PORT: '',
      OTEL_TRACES_EXPORTER: 'none',
      APP_LIFETIME_MS: '200',
      APP_COUNT_THREADS: '1',
    };
    const threads = async (extra: Record<string, string>): Promise<string> => {
      const run = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], { env: { ...env, ...extra } });
      expect(run.code, `${JSON.stringify(extra)}: ${run.stderr}`).toBe(0);
      return /worker threads: \d+/.exec(run.stdout)?.[0] ?? run.stdout;
    };
    for (const runner of [{ JEST_WORKER_ID: '3' }, { NODE_TEST_CONTEXT: 'child-v8' }, { VITEST: 'true', VITEST_WORKER_ID: '1' }]) {
      expect(await threads(runner), JSON.stringify(runner)).toBe('worker threads: 0');
    }
    const port = String(await freePort());
    for (const asked of [{ LIFELINE_WATCHDOG: 'on' }, { LIFELINE_WATCHDOG_THRESHOLD_MS: '2000' }, { LIFELINE_PROBE_PORT: port }]) {
      expect(await threads({ JEST_WORKER_ID: '3', ...asked }), JSON.stringify(asked)).toBe('worker threads: 1');
    }
    expect(await threads({ LIFELINE_PROBE_PORT: port }), 'outside a test runner').toBe('worker threads: 1');
  }, 60_000);

  it("in Kubernetes a probe port held by the cluster's primary is no failure: its workers report to it and run without one", async () => {
    // The port is chosen by the deployment: a plain holder would stop start-up.
    const result = await runCluster('test/fixtures/cluster-app.mjs', { KUBERNETES_SERVICE_HOST: '10.0.0.1' });
    expect(result.stderr).not.toContain('EADDRINUSE');
    expect(result.stdout.match(/worker exit 0/g)).toHaveLength(2);
    expect(
      result.stdout.match(/the probe server of this service instance \(the process that started this one\) answers the probes/g),
    ).toHaveLength(2);
    expect(result.stdout).toContain('probe 200');
    expect(result.code).toBe(0);
  });

  it("a lifeline-looking answer from another service's port is no proof: start-up stops on a chosen port, naming the holder", async () => {
    // Two services of one pod, both on one port: the first is no lifeline of this instance, whatever it answers.
    const { createServer: httpServer } = await import('node:http');
    const forged = httpServer((_req, res) => res.end('{"status":"pass","healthy":["healthcheck"],"unhealthy":[]}'));
    const port = await freePort();
    await new Promise<void>((resolve) => forged.listen(port, '127.0.0.1', resolve));
    try {
      const env = {
        ...outsideTestRunner(),
        OTEL_TRACES_EXPORTER: 'none',
        APP_LIFETIME_MS: '200',
        KUBERNETES_SERVICE_HOST: '10.0.0.1',
        LIFELINE_PROBE_HOST: '127.0.0.1',
      };
      const chosen = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
        env: { ...env, LIFELINE_PROBE_PORT: String(port) },
      });
      expect(chosen.code).toBe(1); // before: 0, running without probes while the other service answered the kubelet
      expect(chosen.stdout).not.toContain('app listening');
      expect(chosen.stderr.trim().split('\n')).toHaveLength(1);
      expect(chosen.stderr).toMatch(
        new RegExp(`LIFELINE_PROBE_PORT="${String(port)}" \\(EADDRINUSE: held by process ${String(process.pid)} \\(`),
      );
      // Even a key inherited from elsewhere is no proof: the holder must answer with it.
      const keyed = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
        env: { ...env, LIFELINE_PROBE_PORT: String(port), LIFELINE_PROBE_HOLDER: `1:1:${String(port)}:${'k'.repeat(43)}` },
      });
      expect(keyed.code).toBe(1);
    } finally {
      forged.closeAllConnections();
      forged.close();
    }
  });

  it.each([
    ['its event loop blocked for 3 intervals', 'block', 'healthcheck'],
    ['a liveness component that never takes a tick', 'stuck', 'stuck'],
  ])("a cluster worker with %s turns the primary's /live 503, naming it", async (_what, fault, component) => {
    const result = await runCluster('test/fixtures/cluster-members.mjs', {
      LIFELINE_HEALTH_INTERVAL_MS: '1000',
      WORKER_FAULT: fault,
      BLOCK_MS: '3000',
    });
    const worker = /^worker (\d+)$/m.exec(result.stdout)?.[1];
    expect(worker, result.stdout + result.stderr).toBeDefined();
    const lines = result.stdout.split('\n');
    const failed = lines.indexOf(`live 503 ${JSON.stringify([`${component}@${String(worker)}`])}`);
    expect(failed, result.stdout).toBeGreaterThan(-1); // before: 200 throughout
    expect(lines.indexOf('live 200 []')).toBeLessThan(failed); // healthy before the fault
    if (fault === 'block') {
      // Failed while blocked, and passing again once its loop runs.
      expect(failed).toBeGreaterThan(lines.indexOf('blocking'));
      expect(lines.lastIndexOf('live 200 []')).toBeGreaterThan(lines.indexOf('unblocked'));
    }
    expect(result.stdout).toContain('done');
  });

  it('LIFELINE_INBOUND_DEADLINES, LIFELINE_MIN_INBOUND_MS and LIFELINE_DEADLINE_HEADER_HOSTS reach the running service', async () => {
    // The upstream says which budget it was told (x-request-timeout-ms), or '-' for none.
    const told: string[] = [];
    const upstream = await serve((req, res) => {
      told.push(String(req.headers['x-request-timeout-ms'] ?? '-'));
      res.end('ok');
    });
    /** The budget the upstream was told when the service was called with `x-request-timeout-ms: inbound`. */
    async function budgetTold(env: NodeJS.ProcessEnv, inbound: string): Promise<string> {
      const app = await startService(
        'test/fixtures/esm-client-app.mjs',
        { OTEL_TRACES_EXPORTER: 'none', LIFELINE_PROBE_PORT: '0', ...env },
        ['--import', 'otel-lifeline/register'],
      );
      try {
        const res = await fetch(`${app.url}/call?port=${String(upstream.port)}`, { headers: { 'x-request-timeout-ms': inbound } });
        expect(await res.text()).toBe('200');
        return told.at(-1) ?? 'no call';
      } finally {
        await app.stop();
      }
    }
    try {
      // Defaults: a loopback caller is trusted, and a loopback upstream is told.
      expect(Number(await budgetTold({}, '5000'))).toBeGreaterThan(4000);
      expect(await budgetTold({ LIFELINE_INBOUND_DEADLINES: 'none' }, '5000')).toBe('-');
      expect(await budgetTold({ LIFELINE_INBOUND_DEADLINES: '10.0.0.0/8' }, '5000')).toBe('-');
      expect(Number(await budgetTold({ LIFELINE_MIN_INBOUND_MS: '3000' }, '5'))).toBeGreaterThan(2000);
      expect(await budgetTold({ LIFELINE_DEADLINE_HEADER_HOSTS: 'service.example.com' }, '5000')).toBe('-');
    } finally {
      await upstream.close();
    }
  });

  it('worker threads do not start a lifeline of their own (the main thread has it)', async () => {
    const port = await freePort();
    const result = await runModule(
      `import { Worker } from 'node:worker_threads';
       const probe = "import { parentPort } from 'node:worker_threads'; parentPort.postMessage(globalThis[Symbol.for('opentelemetry.js.api.1')]?.trace ? 'sdk' : 'none')";
       const worker = new Worker(probe, { eval: true });
       const [answer] = await Promise.all([new Promise((resolve) => worker.once('message', resolve)), new Promise((resolve) => worker.once('exit', resolve))]);
       console.log(answer, globalThis[Symbol.for('opentelemetry.js.api.1')]?.trace ? 'sdk' : 'none');`,
      {
        env: {
          ...process.env,
          NODE_OPTIONS: '--import otel-lifeline/register',
          LIFELINE_PROBE_PORT: String(port),
          OTEL_TRACES_EXPORTER: 'none',
        },
      },
    );
    expect(result.stderr).toBe('');
    expect(result.stdout.trim()).toBe('none sdk');
  });

  it('a busy probe port the deployment chose stops start-up, naming it', async () => {
    const port = await freePort();
    const holder = await holdPort(port);
    try {
      const result = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
        env: { ...process.env, LIFELINE_PROBE_PORT: String(port), OTEL_TRACES_EXPORTER: 'none' },
      });
      expect(result.code).toBe(1);
      expect(result.stdout).not.toContain('app listening');
      expect(result.stderr).toContain(`LIFELINE_PROBE_PORT="${String(port)}" (EADDRINUSE: held by process ${String(process.pid)} (node))`);
    } finally {
      holder?.close();
    }
  });

  it('launchers that inherit NODE_OPTIONS (npm, npx, yarn, pnpm, nodemon, pm2) skip lifeline entirely', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lifeline-pm-'));
    // Prints whether an OpenTelemetry SDK registered its tracer provider in this process.
    const probe = "console.log(globalThis[Symbol.for('opentelemetry.js.api.1')]?.trace ? 'sdk' : 'none')";
    const tools = ['npm-cli.js', 'npx-cli.js', 'yarn.js', 'yarn-4.5.3.cjs', 'pnpm.cjs', 'nodemon.js', 'pm2-runtime'];
    for (const name of [...tools, 'service.js']) writeFileSync(join(dir, name), probe);
    const env = { ...process.env, LIFELINE_PROBE_PORT: '0', OTEL_TRACES_EXPORTER: 'none' };
    for (const tool of tools) {
      const result = await runNode(['--import', 'otel-lifeline/register', join(dir, tool)], { env });
      expect(result.stdout.trim(), tool).toBe('none');
    }
    const service = await runNode(['--import', 'otel-lifeline/register', join(dir, 'service.js')], { env });
    rmSync(dir, { recursive: true, force: true });
    expect(service.stdout.trim()).toBe('sdk');
  });

  it("a test runner's own process skips lifeline when its tests run in processes of their own (tap, vitest)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lifeline-runner-'));
    try {
      const probe = "console.log(globalThis[Symbol.for('opentelemetry.js.api.1')]?.trace ? 'sdk' : 'none')";
      const write = (file: string): string => {
        mkdirSync(dirname(join(dir, file)), { recursive: true });
        writeFileSync(join(dir, file), probe);
        return join(dir, file);
      };
      // Their CLIs as npm links them (.bin/tap, .bin/vitest) and as their files.
      const runners = [
        'tap',
        'vitest',
        join('node_modules', 'tap', 'dist', 'esm', 'run.mjs'),
        join('node_modules', 'vitest', 'vitest.mjs'),
      ];
      // vitest's test processes run a file of its own package, and a service may have a file of the same name.
      const others = [join('node_modules', 'vitest', 'dist', 'workers', 'forks.js'), join('src', 'vitest.mjs'), join('src', 'tap.js')];
      const env = { ...process.env, LIFELINE_PROBE_PORT: '0', OTEL_TRACES_EXPORTER: 'none' };
      const said = async (file: string): Promise<string> =>
        (await runNode(['--import', 'otel-lifeline/register', write(file)], { env })).stdout.trim();
      for (const runner of runners) expect(await said(runner), runner).toBe('none');
      for (const other of others) expect(await said(other), other).toBe('sdk');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says once that spans cannot be exported when no collector listens', async () => {
    const closed = await freePort();
    const app = await startService(
      'test/fixtures/esm-client-app.mjs',
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(closed)}`,
        OTEL_EXPORTER_OTLP_TIMEOUT: '500',
        OTEL_BSP_SCHEDULE_DELAY: '20',
        LIFELINE_PROBE_PORT: '0',
        LIFELINE_AUTO_INSTRUMENTATIONS: 'off',
      },
      ['--import', 'otel-lifeline/register'],
    );
    try {
      // Several failed exports: each call makes spans, each batch fails.
      let lines: string[] = [];
      for (let i = 0; i < 40 && lines.length === 0; i++) {
        await fetch(`${app.url}/`);
        await new Promise((resolve) => setTimeout(resolve, 100));
        lines = app
          .stdout()
          .split('\n')
          .filter((line) => line.includes('spans cannot be exported'));
      }
      for (let i = 0; i < 5; i++) await fetch(`${app.url}/`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      lines = app
        .stdout()
        .split('\n')
        .filter((line) => line.includes('spans cannot be exported'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`127.0.0.1:${String(closed)}`);
    } finally {
      await app.stop();
    }
  });

  // Longer than the others: the first run fetches that Node from the registry (~30 MB, cached in .cache/).
  it('on a Node older than 22.15, register mode says which Node it needs instead of crashing', { timeout: 180_000 }, () => {
    const old = oldNode(); // from the npm registry, whatever Node the machine has
    expect(spawnSync(old, ['--version'], { encoding: 'utf8' }).stdout.trim()).toBe(`v${OLD_NODE_VERSION}`);
    const result = spawnSync(old, ['--import', 'otel-lifeline/register', '-e', 'console.log("ran")'], {
      encoding: 'utf8',
      env: { ...process.env, LIFELINE_PROBE_PORT: '0' },
    });
    expect(result.status).toBe(1);
    expect(result.stdout).not.toContain('ran');
    expect(result.stderr).toMatch(/^lifeline: otel-lifeline needs Node\.js >= 22\.15, this is v\d+/);
    // Started in code, the same: a LifelineError saying so, not a TypeError from inside undici.
    const inCode = spawnSync(
      old,
      ['--input-type=module', '-e', "import('otel-lifeline/sdk').then((m) => m.startLifeline()).catch((e) => console.log(e.code))"],
      { encoding: 'utf8' },
    );
    expect(inCode.stdout.trim()).toBe('ERR_UNSUPPORTED_NODE');
    // A launcher on that Node (`NODE_OPTIONS=--import … npm test`) is not the service: it runs.
    const dir = mkdtempSync(join(tmpdir(), 'lifeline-old-npm-'));
    writeFileSync(join(dir, 'npm-cli.js'), 'console.log("npm ran")');
    const launcher = spawnSync(old, ['--import', 'otel-lifeline/register', join(dir, 'npm-cli.js')], { encoding: 'utf8' });
    rmSync(dir, { recursive: true, force: true });
    expect(launcher.stderr).toBe('');
    expect(launcher.stdout.trim()).toBe('npm ran');
  });

  it.each([
    ['20.20.2', false],
    ['22.14.0', false],
    ['22.15.0', true],
    ['24.21.0', true],
    ['26.0.0', true],
  ])('Node %s is supported: %s', (version, supported) => {
    expect(unsupportedNode(version) === undefined).toBe(supported);
  });
});

/** Runs a node:cluster fixture under NODE_OPTIONS register mode, outside a test runner, on a probe port of its own. */
async function runCluster(fixture: string, env: NodeJS.ProcessEnv) {
  return runNode([fixture], {
    env: {
      ...outsideTestRunner(),
      NODE_OPTIONS: '--import otel-lifeline/register',
      LIFELINE_PROBE_PORT: String(await freePort()),
      LIFELINE_PROBE_HOST: '127.0.0.1',
      OTEL_TRACES_EXPORTER: 'none',
      ...env,
    },
    timeoutMs: 30_000,
  });
}

/** Listens on `port` (all interfaces, as the probe server does), or `undefined` if something already does. */
async function holdPort(port: number): Promise<Server | undefined> {
  const server = createServer();
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') resolve(undefined);
      else reject(err);
    });
    server.listen(port, () => {
      resolve(server);
    });
  });
}

/** This process's environment without what says it runs in a test runner (vitest's variables). */
function outsideTestRunner(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('VITEST')));
}
