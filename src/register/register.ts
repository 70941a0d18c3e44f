/**
 * `node --import otel-lifeline/register app.js`: instruments an unmodified service, configured by
 * the environment. A misconfiguration stops start-up with a message naming the variable. This entry
 * exports nothing.
 * @packageDocumentation
 */

// Nothing heavy is imported statically: the Node version is checked before any dependency loads
// (an old Node would otherwise crash deep inside one), and tooling processes that inherit
// `NODE_OPTIONS` (npm, npx, yarn, pnpm) skip lifeline without loading it.
import { basename, join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { DEFAULT_PROBE_PORT, inKubernetes, unsupportedNode } from '../config/index.js';
import { errorText } from '../errors/index.js';

// Processes that only start the service — package managers (`npm start`), watchers and process
// managers (nodemon, pm2, tsx's CLI) — inherit NODE_OPTIONS too. They are not the service: they
// would take the probe port (the kubelet would then probe them) and pay lifeline's start-up for nothing.
const LAUNCHER = /^(npm|npx|pnpm|pnpx|yarn|yarnpkg|corepack|nodemon|pm2|pm2-runtime|tsx)(-cli)?(\.[cm]?js)?$|^yarn-[\d.]+(-[\w.]+)?\.cjs$/;
const LAUNCHER_PACKAGE = /[\\/]node_modules[\\/](nodemon|pm2|tsx)[\\/]/;
// A test runner's own process only starts the processes that run the tests: tap's always does, and
// so does vitest's with its default pool (with a thread pool it runs them in worker threads of its
// own, which skip lifeline anyway). jest's may run them itself; `node --test`'s loads no --import.
// Their CLIs by the names npm links them under, and by their files.
const RUNNER = /^(tap|vitest)$/;
const RUNNER_PACKAGE = /[\\/]node_modules[\\/](tap[\\/]dist[\\/]\w+[\\/]run|vitest[\\/]vitest)\.m?js$/;
const main = process.argv[1] ?? '';
const skip =
  // A worker thread shares the process (and its probe port) with the main thread, which runs lifeline.
  !isMainThread ||
  LAUNCHER.test(basename(main)) ||
  LAUNCHER_PACKAGE.test(main) ||
  RUNNER.test(basename(main)) ||
  RUNNER_PACKAGE.test(main) ||
  process.env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true';

if (!skip) await start();

async function start(): Promise<void> {
  // After the launcher check: `npm test` on an older system Node still runs, only the service is refused.
  const unsupported = unsupportedNode();
  if (unsupported !== undefined) fail(`${unsupported}: upgrade Node, or remove --import otel-lifeline/register`);
  const { readEnvConfig } = await import('../config/index.js');
  let config: import('../config/index.js').EnvConfig;
  try {
    config = readEnvConfig();
  } catch (err) {
    fail(errorText(err));
  }
  // Imported only once the environment is known to be valid.
  const { startLifeline } = await import('../sdk/index.js');
  const { logLevel } = config;
  const logger = logLevel === undefined ? undefined : (await import('pino')).pino({ name: 'lifeline', level: logLevel });
  // Nobody probes a test runner's processes: without a port chosen they serve none (and say nothing
  // of it). In Kubernetes a probe server is always wanted, whatever the environment says.
  const unprobedTestProcess = config.probe !== false && config.probe.port === undefined && !inKubernetes() && inTestRunner();
  try {
    await startLifeline({
      probe:
        config.probe === false || unprobedTestProcess
          ? false
          : { ...config.probe, ...config.probeLimits, whenPortBusy: whenPortBusy(config.probe.port) },
      exportBuffer: config.exportBuffer,
      // Nor, unless the environment asks for it, the watchdog thread, which answers the probes
      // while the loop is blocked (and reports the block): an isolate that costs each test
      // process ~14 MB and ~50 ms of CPU (by hand: BENCHMARKS.md, Adoption).
      watchdog: config.watchdog ?? (unprobedTestProcess ? false : {}),
      ...(config.evidence ? {} : { evidence: false as const }),
      ...(config.grpcHealth ? {} : { grpcHealth: false }),
      deadlines: {
        headersTimeoutMs: config.headersTimeoutMs,
        ...(config.defaultTimeoutMs === undefined ? {} : { defaultTimeoutMs: config.defaultTimeoutMs }),
        ...(config.deadlineHeaderHosts === undefined ? {} : { deadlineHeaderHosts: config.deadlineHeaderHosts }),
        ...(config.envoyUpstreamTimeout ? { envoyUpstreamTimeout: true } : {}),
      },
      propagation: {
        ...(config.inboundDeadlines === undefined ? {} : { trustInbound: config.inboundDeadlines }),
        ...(config.minInboundMs === undefined ? {} : { minInboundMs: config.minInboundMs }),
      },
      ...(config.diagnosticsLog === undefined && config.stuckAfterMs === undefined
        ? {}
        : {
            diagnostics: {
              ...(config.diagnosticsLog === undefined ? {} : { log: config.diagnosticsLog }),
              ...(config.stuckAfterMs === undefined ? {} : { stuckAfterMs: config.stuckAfterMs }),
            },
          }),
      ...(logger === undefined ? {} : { logger }),
      // ES module apps import node:http and the clients before any code of theirs runs: only a
      // loader hook lets the instrumentations see them. CommonJS needs none.
      esmHook: config.esmHook,
      autoInstrumentations: config.autoInstrumentations ? 'if-installed' : false,
    });
    // lifeline brings its own OpenTelemetry API; an app on an older 1.x reads what it registered.
    const { appApiMismatch } = await import('../config/index.js');
    const { loggerOrDefault } = await import('../log/index.js');
    const mismatch = appApiMismatch(main === '' ? join(process.cwd(), 'index.js') : main);
    if (mismatch !== undefined) loggerOrDefault(logger)[mismatch.level]({}, `lifeline: ${mismatch.message}`);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (
      code !== undefined &&
      ['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN'].includes(code) &&
      config.probe !== false
    ) {
      // A busy port names its holder (`process 4242 (node)`), found when lifeline would not defer to it.
      const holder = (err as { holder?: unknown }).holder;
      fail(
        `cannot start the probe server on LIFELINE_PROBE_HOST=${JSON.stringify(config.probe.host ?? '(default)')} LIFELINE_PROBE_PORT=${JSON.stringify(String(config.probe.port ?? DEFAULT_PROBE_PORT))} (${code}${typeof holder === 'string' ? `: held by ${holder}` : ''})`,
      );
    }
    fail(errorText(err));
  }
}

/**
 * A port nobody chose may be taken by a sibling process — a test runner's workers, a second script
 * of the same image — so by default lifeline warns and runs without a probe server. In Kubernetes,
 * outside a test runner, it fails instead: a liveness probe answered by another process would lie
 * (unless that process is this service instance's own lifeline: a cluster's primary, the process
 * that forked this one, proven by the key this process inherited).
 */
function whenPortBusy(chosen: number | undefined): 'warn' | 'fail' {
  if (chosen !== undefined) return 'fail';
  return inKubernetes() && !inTestRunner() ? 'fail' : 'warn';
}

/**
 * A process a test runner started to run tests: jest's, vitest's, tap's and node --test's workers
 * say so in their environment, each with a value of its own shape (checked, so a stray variable of
 * the same name is not taken for one).
 */
function inTestRunner(): boolean {
  const env = process.env;
  const number = /^\d+$/;
  return (
    number.test(env.JEST_WORKER_ID ?? '') ||
    env.VITEST === 'true' ||
    number.test(env.VITEST_WORKER_ID ?? '') ||
    env.TAP === '1' ||
    number.test(env.TAP_CHILD_ID ?? '') ||
    (env.NODE_TEST_CONTEXT ?? '').startsWith('child')
  );
}

function fail(message: string): never {
  process.stderr.write(`lifeline: ${message}\n`);
  process.exit(1);
}
