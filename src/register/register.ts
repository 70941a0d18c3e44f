/**
 * `node --import otel-lifeline/register app.js`: instruments an unmodified service, configured by
 * the environment. A misconfiguration stops start-up with a message naming the variable.
 *
 * Nothing heavy is imported statically: the Node version is checked before any dependency loads
 * (an old Node would otherwise crash deep inside one), and tooling processes that inherit
 * `NODE_OPTIONS` (npm, npx, yarn, pnpm) skip lifeline without loading it.
 */
import { basename } from 'node:path';
import { unsupportedNode } from '../config/index.js';

const unsupported = unsupportedNode();
if (unsupported !== undefined) fail(`${unsupported}: upgrade Node, or remove --import otel-lifeline/register`);

// The package manager that runs `npm start` is not the service: it would take the probe port
// (kubelet would then probe npm) and pay lifeline's start-up for nothing.
const PACKAGE_MANAGER = /^(npm|npx|pnpm|pnpx|yarn|yarnpkg|corepack)(-cli)?(\.[cm]?js)?$/;
const skip = PACKAGE_MANAGER.test(basename(process.argv[1] ?? '')) || process.env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true';

if (!skip) await start();

async function start(): Promise<void> {
  const { readEnvConfig } = await import('../config/index.js');
  let config: import('../config/index.js').EnvConfig;
  try {
    config = readEnvConfig();
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
  // Imported only once the environment is known to be valid: the process-wide catalog reads it on load.
  const { startLifeline } = await import('../sdk/index.js');
  const { logLevel } = config;
  const logger = logLevel === undefined ? undefined : (await import('pino')).pino({ name: 'lifeline', level: logLevel });
  try {
    await startLifeline({
      // A port nobody chose may be taken by a sibling process (test runners, workers): warn, go on.
      probe: config.probe === false ? false : { ...config.probe, whenPortBusy: config.probe.port === undefined ? 'warn' : 'fail' },
      deadlines: {
        headersTimeoutMs: config.headersTimeoutMs,
        ...(config.defaultTimeoutMs === undefined ? {} : { defaultTimeoutMs: config.defaultTimeoutMs }),
        ...(config.deadlineHeaderHosts === undefined ? {} : { deadlineHeaderHosts: config.deadlineHeaderHosts }),
      },
      propagation: {
        ...(config.inboundDeadlines === undefined ? {} : { trustInbound: config.inboundDeadlines }),
        ...(config.minInboundMs === undefined ? {} : { minInboundMs: config.minInboundMs }),
      },
      ...(config.diagnosticsLog === undefined ? {} : { diagnostics: { log: config.diagnosticsLog } }),
      ...(logger === undefined ? {} : { logger }),
      // ES module apps import node:http and the clients before any code of theirs runs: only a
      // loader hook lets the instrumentations see them. CommonJS needs none.
      esmHook: config.esmHook,
      autoInstrumentations: config.autoInstrumentations ? 'if-installed' : false,
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== undefined && ['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN'].includes(code) && config.probe !== false) {
      fail(`cannot start the probe server on LIFELINE_PROBE_HOST=${JSON.stringify(config.probe.host ?? '(default)')} LIFELINE_PROBE_PORT=${JSON.stringify(String(config.probe.port ?? 5555))} (${code})`);
    }
    fail(err instanceof Error ? err.message : String(err));
  }
}

function fail(message: string): never {
  process.stderr.write(`lifeline: ${message}\n`);
  process.exit(1);
}
