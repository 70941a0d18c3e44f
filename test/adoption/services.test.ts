/**
 * Adding lifeline to real-looking services and their test suites, installed from the packed tarball
 * (see test/fixtures/services/): each suite passes plainly and with
 * `NODE_OPTIONS="--import otel-lifeline/register"` (every Node process of the run — the npm script,
 * the runner, its workers — loads register mode, as users do it), not much slower; and each service
 * started in register mode serves its probes, bounds its outgoing calls, and survives a busy default
 * probe port.
 */
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { otlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import {
  closeServer,
  describeRun,
  EVIDENCE_MODULE,
  freePort,
  installService,
  listen,
  readEvidence,
  removeDir,
  run,
  serviceEnv,
  startCollector,
  startService,
  startSilentUpstream,
  stopChild,
  type RunResult,
} from './support.js';

interface Service {
  name: string;
  runner: string;
  entry: string;
  /** A route whose handler calls the upstream (UPSTREAM_URL); every service answers 503 when that call fails. */
  upstreamRoute: string;
  /** Node processes that run test files under lifeline (jest's own process may be one more). */
  minTestProcesses: number;
  /** The name of the upstream route's server span: its framework's route (no OpenTelemetry instrumentation for it is installed), or the method alone. */
  serverSpan: string;
}

const SERVICES: Service[] = [
  {
    name: 'esm-express-fetch',
    runner: 'node --test (3 files, a process each)',
    entry: 'src/server.mjs',
    upstreamRoute: '/products/7',
    minTestProcesses: 3,
    serverSpan: 'GET /products/:id',
  },
  {
    name: 'cjs-express-axios',
    runner: 'jest (3 files, 2 workers)',
    entry: 'src/server.js',
    upstreamRoute: '/profiles/ada',
    minTestProcesses: 3,
    serverSpan: 'GET /profiles/:user',
  },
  {
    name: 'esm-tap',
    runner: 'tap (3 files, a process each)',
    entry: 'src/server.mjs',
    upstreamRoute: '/convert?from=EUR&to=USD',
    minTestProcesses: 3,
    serverSpan: 'GET', // node:http alone: no route to name
  },
  {
    name: 'vitest-fastify-undici',
    runner: 'vitest (2 files, forks pool)',
    entry: 'src/server.js',
    upstreamRoute: '/search?q=deadlines',
    minTestProcesses: 2,
    serverSpan: 'GET /search',
  },
];

/** Generous on purpose: this guards against lifeline breaking or crippling suites, it is no benchmark. */
const MAX_SLOWDOWN = { factor: 2, plusMs: 5_000 };
const DEFAULT_TIMEOUT_MS = 1_000;
const SUITE_TIMEOUT_MS = 120_000;

const figures: string[] = [];
// The suites' time under register mode ÷ their plain time (the better of two plain runs), as a table for BENCHMARKS.md.
const ratios: string[] = [];
// Start-up of each service until it listens, plain and under register mode (probe server, OTLP exporter).
const startups = new Map<string, { plain?: string; lifeline?: string }>();
const startupText = (started: { startupMs: number; rssMb: number | undefined }): string =>
  `${String(started.startupMs)} ms, ${started.rssMb === undefined ? '?' : String(started.rssMb)} MB`;
afterAll(() => {
  if (figures.length > 0) console.log(`adoption figures:\n${figures.map((line) => `  ${line}`).join('\n')}`);
  if (ratios.length > 0)
    console.log(
      [
        'test suites under NODE_OPTIONS="--import otel-lifeline/register" (ms; ratio to plain):',
        '| service | runner | plain | collector up | no collector | probe-port lines |',
        '|---|---|---|---|---|---|',
        ...ratios,
      ].join('\n'),
    );
  if (startups.size > 0)
    console.log(
      [
        'service start-up until it listens (time, RSS then):',
        '| service | plain | register mode |',
        '|---|---|---|',
        ...[...startups].map(([name, { plain, lifeline }]) => `| ${name} | ${plain ?? '?'} | ${lifeline ?? '?'} |`),
      ].join('\n'),
    );
});

const httpGet = async (url: string, timeoutMs = 10_000): Promise<{ status: number; body: string; ms: number }> => {
  const started = performance.now();
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const body = await res.text();
  return { status: res.status, body, ms: Math.round(performance.now() - started) };
};

describe.each(SERVICES)('$name ($runner)', (service) => {
  let dir: string | undefined;
  let serviceDir = '';

  beforeAll(async () => {
    const { dir: installed, install } = await installService(service.name, inject('lifelineTarball'));
    dir = installed;
    serviceDir = installed;
    figures.push(`${service.name}: npm install ${install.ms} ms`);
    // Installed outside the repository: lifeline resolves from the service's own node_modules.
    const resolved = await run(process.execPath, ['-p', "require.resolve('otel-lifeline/package.json')"], {
      cwd: installed,
      env: serviceEnv(),
      timeoutMs: 10_000,
    });
    expect(resolved.stdout.trim()).toBe(join(installed, 'node_modules/otel-lifeline/package.json'));
  });
  afterAll(() => removeDir(dir));

  it('its own test suite passes plainly and under NODE_OPTIONS="--import otel-lifeline/register", in every process, not much slower', async () => {
    const npmTest = (extra: NodeJS.ProcessEnv = {}): Promise<RunResult> =>
      run('npm', ['test'], { cwd: serviceDir, env: serviceEnv(extra), timeoutMs: SUITE_TIMEOUT_MS });

    const plainFirst = await npmTest(); // also warms the runner's caches (jest's transforms, tap's build)
    expect(plainFirst.code, describeRun('plain npm test', plainFirst)).toBe(0);

    const evidenceModule = join(serviceDir, '.adoption-evidence.mjs');
    const evidenceFile = join(serviceDir, 'adoption-evidence.jsonl');
    await writeFile(evidenceModule, EVIDENCE_MODULE);
    const collector = await startCollector();
    let lifeline: RunResult;
    try {
      lifeline = await npmTest({
        NODE_OPTIONS: `--import otel-lifeline/register --import ${pathToFileURL(evidenceModule).href}`,
        OTEL_SERVICE_NAME: service.name,
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
        ADOPTION_EVIDENCE_FILE: evidenceFile,
      });
    } finally {
      await collector.close();
    }
    expect(lifeline.code, describeRun('npm test under register mode', lifeline)).toBe(0);

    // No collector at all (a developer's laptop, a CI job): nothing listens on the endpoint.
    const noCollector = await npmTest({
      NODE_OPTIONS: '--import otel-lifeline/register',
      OTEL_SERVICE_NAME: service.name,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(await freePort())}`,
    });
    expect(noCollector.code, describeRun('npm test under register mode, no collector', noCollector)).toBe(0);

    const plainSecond = await npmTest();
    expect(plainSecond.code, describeRun('plain npm test (again)', plainSecond)).toBe(0);

    // Register mode really ran in the suite's processes. It skips npm's own process, and tap's and
    // vitest's CLI processes (they only start the processes that run the tests), by design.
    const processes = (await readEvidence(evidenceFile)).filter(({ argv }) => !/npm-cli\.js$|\/npm$/.test(argv[0] ?? ''));
    const runnerCli = ({ argv }: { argv: string[] }): boolean => /[\\/](tap|vitest)$|[\\/]vitest\.mjs$/.test(argv[0] ?? '');
    for (const proc of processes.filter(runnerCli)) expect(proc.tracerProvider, JSON.stringify(proc)).toBe('NoopTracerProvider');
    const evidence = processes.filter((proc) => !runnerCli(proc));
    expect(evidence.length, `processes that loaded register mode: ${JSON.stringify(evidence)}`).toBeGreaterThanOrEqual(
      service.minTestProcesses,
    );
    for (const proc of evidence) {
      expect(proc.tracerProvider, JSON.stringify(proc)).not.toBe('NoopTracerProvider');
      expect(proc.propagationFields, JSON.stringify(proc)).toContain('x-request-timeout-ms');
    }

    const plainMs = Math.min(plainFirst.ms, plainSecond.ms);
    const probeLines = (run: RunResult): number => (run.stdout + run.stderr).split('\n').filter((line) => /probe/i.test(line)).length;
    const ratio = (run: RunResult): string => (run.ms / plainMs).toFixed(2);
    figures.push(
      `${service.name}: npm test plain ${plainFirst.ms} / ${plainSecond.ms} ms, register mode ${lifeline.ms} ms (${evidence.length} processes under lifeline, ${probeLines(lifeline)} probe-port lines in the output)`,
    );
    ratios.push(
      `| ${service.name} | ${service.runner} | ${plainMs} | ${lifeline.ms} (${ratio(lifeline)}×) | ${noCollector.ms} (${ratio(noCollector)}×) | ${probeLines(lifeline) + probeLines(noCollector)} |`,
    );
    console.log(figures.at(-1));
    for (const run of [lifeline, noCollector])
      expect(run.ms, `register mode ${run.ms} ms vs plain ${plainMs} ms`).toBeLessThan(MAX_SLOWDOWN.factor * plainMs + MAX_SLOWDOWN.plusMs);
  });

  it(`started with register mode: /live answers on the probe port, a call to a silent upstream ends by LIFELINE_DEFAULT_TIMEOUT_MS, the server span is named by the route`, async () => {
    const upstream = await startSilentUpstream();
    const collector = await otlpReceiver();
    const probePort = await freePort();
    const started = await startService(
      serviceDir,
      ['--import', 'otel-lifeline/register', service.entry],
      serviceEnv({
        PORT: '0',
        UPSTREAM_URL: upstream.url,
        LIFELINE_PROBE_PORT: String(probePort),
        LIFELINE_DEFAULT_TIMEOUT_MS: String(DEFAULT_TIMEOUT_MS),
        OTEL_SERVICE_NAME: service.name,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '50',
      }),
    );
    startups.set(service.name, { ...startups.get(service.name), lifeline: startupText(started) });
    try {
      const live = await httpGet(`http://127.0.0.1:${probePort}/live`);
      expect(live.status, live.body).toBe(200);
      expect(JSON.parse(live.body)).toMatchObject({ status: 'pass' });

      const call = await httpGet(`http://127.0.0.1:${started.port}${service.upstreamRoute}`, 15_000);
      figures.push(
        `${service.name}: call to a silent upstream under LIFELINE_DEFAULT_TIMEOUT_MS=${DEFAULT_TIMEOUT_MS} answered ${call.status} after ${call.ms} ms`,
      );
      expect(call.status, call.body).toBe(503); // the service's own answer to a failed upstream call
      expect(call.ms).toBeGreaterThanOrEqual(DEFAULT_TIMEOUT_MS - 50);
      expect(call.ms).toBeLessThan(DEFAULT_TIMEOUT_MS + 3_000);
      expect(upstream.connections()).toBeGreaterThanOrEqual(1);
      expect(started.child.exitCode, started.output()).toBeNull();
      const SERVER = 2;
      const served = (spans: ReceivedSpan[]) => spans.filter((s) => s.kind === SERVER && s.attributes['http.response.status_code'] === 503);
      const [server] = served(await collector.waitFor((spans) => served(spans).length > 0));
      expect(server?.name).toBe(service.serverSpan);
    } finally {
      await stopChild(started.child, 'SIGKILL');
      await upstream.close();
      await collector.close();
    }
  });

  it("contrast: started plainly, the same call is still waiting well after that deadline (the bound above is lifeline's)", async () => {
    const upstream = await startSilentUpstream();
    const started = await startService(serviceDir, [service.entry], serviceEnv({ PORT: '0', UPSTREAM_URL: upstream.url }));
    startups.set(service.name, { ...startups.get(service.name), plain: startupText(started) });
    try {
      const waitMs = DEFAULT_TIMEOUT_MS + 1_500;
      await expect(httpGet(`http://127.0.0.1:${started.port}${service.upstreamRoute}`, waitMs)).rejects.toMatchObject({
        name: 'TimeoutError',
      });
      expect(upstream.connections()).toBeGreaterThanOrEqual(1);
    } finally {
      await stopChild(started.child, 'SIGKILL');
      await upstream.close();
    }
  });

  it('a busy default probe port (5555) does not stop the service: one line, then it serves', async () => {
    // Holds the port, reads what comes and never answers: lifeline asks it whether it is a lifeline.
    const blocker = createServer((socket) => socket.resume());
    const blocked = await listen(blocker, 5555).then(
      () => true,
      (err: unknown) => {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
        return false; // something else holds it: busy all the same
      },
    );
    const upstream = await startSilentUpstream();
    try {
      const started = await startService(
        serviceDir,
        ['--import', 'otel-lifeline/register', service.entry],
        serviceEnv({
          PORT: '0',
          UPSTREAM_URL: upstream.url,
          OTEL_TRACES_EXPORTER: 'none',
        }),
      );
      try {
        const health = await httpGet(`http://127.0.0.1:${started.port}/healthz`);
        expect(health.status).toBe(200);
        expect(started.child.exitCode, started.output()).toBeNull();
        const lines = started
          .output()
          .split('\n')
          .filter((line) => /probe/i.test(line));
        expect(lines, started.output()).toHaveLength(1);
        expect(lines[0]).toContain('5555');
      } finally {
        await stopChild(started.child, 'SIGKILL');
      }
    } finally {
      await upstream.close();
      if (blocked) await closeServer(blocker);
    }
  });
});
