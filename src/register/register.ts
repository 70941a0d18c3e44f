/**
 * `node --import otel-lifeline/register app.js`: instruments an unmodified service, configured by the
 * environment. A misconfiguration stops start-up with a message naming the variable.
 */
import { register } from 'node:module';
import { readEnvConfig, type EnvConfig } from '../config/index.js';

let config: EnvConfig;
try {
  config = readEnvConfig();
} catch (err) {
  fail(err);
}

// ESM apps import `node:http` before any code of theirs runs: only a loader hook lets the http
// instrumentation see their servers (and so extract inbound deadlines). CommonJS needs no hook.
// module.register is deprecated in favour of registerHooks, but import-in-the-middle (what
// OpenTelemetry's hook is built on) ships only a register-style loader for now.
// eslint-disable-next-line @typescript-eslint/no-deprecated
register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);

// Imported only once the environment is known to be valid: the process-wide catalog reads it on load.
const { startLifeline } = await import('../sdk/index.js');
const { pino } = await import('pino');
try {
  await startLifeline({
    probe: config.probe,
    ...(config.defaultTimeoutMs === undefined ? {} : { deadlines: { defaultTimeoutMs: config.defaultTimeoutMs } }),
    ...(config.diagnosticsLog === undefined ? {} : { diagnostics: { log: config.diagnosticsLog } }),
    ...(config.logLevel === undefined ? {} : { logger: pino({ name: 'lifeline', level: config.logLevel }) }),
  });
} catch (err) {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== undefined && ['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN'].includes(code) && config.probe !== false) {
    fail(new Error(`cannot start the probe server on LIFELINE_PROBE_HOST=${JSON.stringify(config.probe.host ?? '(default)')} LIFELINE_PROBE_PORT=${JSON.stringify(String(config.probe.port ?? 5555))} (${code})`));
  }
  fail(err);
}

function fail(err: unknown): never {
  process.stderr.write(`lifeline: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
