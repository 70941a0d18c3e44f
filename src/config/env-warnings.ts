import { MAX_TIMER_MS } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { Redactor } from '../redaction/index.js';
import { envInteger, healthIntervalFromEnv } from './env-config.js';

/**
 * The environment settings lifeline reads, or hands to the OpenTelemetry SDK, that are warned about
 * rather than refused: the `OTEL_*` export settings (as the SDK has it, a bad value falls back to a
 * default; the SDK's own warnings go to `diag`, which nobody sees unless `OTEL_LOG_LEVEL` is set)
 * and a `LIFELINE_*` value that is valid but probably a mistake. Every such rule lives here, so what
 * is said and what is used are decided once.
 */
export interface EnvCorrection {
  readonly variable: string;
  /** As set: trimmed, cut to 64 characters, secrets redacted (an endpoint may carry credentials). */
  readonly value: string;
  /** What is used instead, in words (`1000`, `the default http://localhost:4318`). */
  readonly used: string;
  /** The warning: the variable, what is wrong with the value, and what is used. */
  readonly message: string;
  /**
   * What the SDK is handed while it reads the environment: a value, or `null` to leave the variable
   * unset (the SDK's default). `undefined`: the value is used as set, only said.
   */
  readonly replacement: string | null | undefined;
}

const PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'];
const METRICS_EXPORTERS = ['otlp', 'console', 'prometheus', 'none'];
const PROPAGATED = ['tracecontext', 'baggage'];
const SIGNALS = [
  { name: 'TRACES', path: 'v1/traces' },
  { name: 'METRICS', path: 'v1/metrics' },
  { name: 'LOGS', path: 'v1/logs' },
] as const;
/** The OTLP exporters' default timeout (ms). */
const DEFAULT_OTLP_TIMEOUT_MS = 10_000;
const DEFAULT_METRIC_INTERVAL_MS = 60_000;
const DEFAULT_METRIC_TIMEOUT_MS = 30_000;
/**
 * The shortest metric export interval taken (ms). An idle service exporting every millisecond spent
 * 63 % of a core on it; at 1 s it spends 1–2 % more than at the default 60 s (`bench/metric-export-interval.mjs`), and no metrics
 * backend reads finer than that (Prometheus scrapes every 15–60 s). Seconds typed as milliseconds
 * (`60`) land on it too.
 */
export const MIN_METRIC_EXPORT_INTERVAL_MS = 1_000;
/** A catalog interval below this is taken but said: `30` was probably meant as seconds. */
const DOUBTFUL_HEALTH_INTERVAL_MS = 1_000;
const DEFAULT_QUEUE_SIZE = 2048;

/** Every setting of `env` lifeline does not take as given, in the order they are read. Pure: says nothing. */
export function envCorrections(env: NodeJS.ProcessEnv = process.env): EnvCorrection[] {
  const found: EnvCorrection[] = [];
  const invalid = (variable: string, value: string, expected: string, used: string, replacement: EnvCorrection['replacement']): void => {
    const shown = redacted(value);
    found.push({
      variable,
      value: shown,
      used,
      replacement,
      message: `lifeline: invalid ${variable}=${JSON.stringify(shown)} (expected ${expected}); using ${used}`,
    });
  };
  const integer = (variable: string, min: number, max: number, fallback: string): number | undefined => {
    const result = envInteger(env, variable, min, max);
    if (!('invalid' in result)) return result.value;
    invalid(variable, result.invalid, result.expected, fallback, null);
    return undefined;
  };

  // Where the OTLP exporters send, and how long they wait.
  const grpc = (signal: string): boolean =>
    given(env, `OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`, given(env, 'OTEL_EXPORTER_OTLP_PROTOCOL')) === 'grpc';
  const base = given(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const baseGrpc = given(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') === 'grpc';
  const baseValid = base === undefined || endpointValid(base, baseGrpc);
  if (!baseValid)
    invalid(
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      base,
      'an http:// or https:// URL',
      `the default ${baseGrpc ? 'http://localhost:4317' : 'http://localhost:4318'}`,
      null,
    );
  for (const signal of SIGNALS) {
    const variable = `OTEL_EXPORTER_OTLP_${signal.name}_ENDPOINT`;
    const value = given(env, variable);
    if (value === undefined || endpointValid(value, grpc(signal.name))) continue;
    const fallback =
      base !== undefined && baseValid
        ? `OTEL_EXPORTER_OTLP_ENDPOINT (${redacted(base)})`
        : `the default ${grpc(signal.name) ? 'http://localhost:4317' : `http://localhost:4318/${signal.path}`}`;
    invalid(variable, value, 'an http:// or https:// URL', fallback, null);
  }
  const timeout = integer('OTEL_EXPORTER_OTLP_TIMEOUT', 1, MAX_TIMER_MS, `the default ${String(DEFAULT_OTLP_TIMEOUT_MS)}`);
  const timeoutFallback =
    timeout === undefined ? `the default ${String(DEFAULT_OTLP_TIMEOUT_MS)}` : `OTEL_EXPORTER_OTLP_TIMEOUT (${String(timeout)})`;
  for (const signal of SIGNALS) integer(`OTEL_EXPORTER_OTLP_${signal.name}_TIMEOUT`, 1, MAX_TIMER_MS, timeoutFallback);
  const compression = given(env, 'OTEL_EXPORTER_OTLP_COMPRESSION');
  const compressionValid = compression === undefined || compression === 'gzip' || compression === 'none';
  if (!compressionValid) invalid('OTEL_EXPORTER_OTLP_COMPRESSION', compression, 'gzip or none', 'none', null);
  for (const signal of SIGNALS) {
    const variable = `OTEL_EXPORTER_OTLP_${signal.name}_COMPRESSION`;
    const value = given(env, variable);
    if (value !== undefined && value !== 'gzip' && value !== 'none')
      invalid(
        variable,
        value,
        'gzip or none',
        compressionValid && compression !== undefined ? `OTEL_EXPORTER_OTLP_COMPRESSION (${compression})` : 'none',
        null,
      );
  }
  // Traces refuse a bad protocol (see traceExportersFromEnv); the SDK's metrics and logs exporters fall back to http/protobuf.
  for (const signal of ['METRICS', 'LOGS']) {
    const variable = `OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`;
    const value = given(env, variable);
    if (value !== undefined && !PROTOCOLS.includes(value)) invalid(variable, value, PROTOCOLS.join(', '), 'http/protobuf', 'http/protobuf');
  }

  // Metrics, when the SDK exports them.
  const metricsExporter = given(env, 'OTEL_METRICS_EXPORTER');
  if (metricsExporter !== undefined) {
    const names = metricsExporter.split(',').map((name) => name.trim());
    const known = names.filter((name) => METRICS_EXPORTERS.includes(name));
    if (known.length < names.filter((name) => name !== '').length) {
      const used = known.length === 0 ? 'none' : [...new Set(known)].join(',');
      invalid('OTEL_METRICS_EXPORTER', metricsExporter, `a list of ${METRICS_EXPORTERS.join(', ')}`, used, used);
    }
  }
  const interval = envInteger(env, 'OTEL_METRIC_EXPORT_INTERVAL', 1, MAX_TIMER_MS);
  if ('invalid' in interval)
    invalid('OTEL_METRIC_EXPORT_INTERVAL', interval.invalid, interval.expected, `the default ${String(DEFAULT_METRIC_INTERVAL_MS)}`, null);
  else if (interval.value !== undefined && interval.value < MIN_METRIC_EXPORT_INTERVAL_MS) {
    const floor = String(MIN_METRIC_EXPORT_INTERVAL_MS);
    invalid(
      'OTEL_METRIC_EXPORT_INTERVAL',
      String(interval.value),
      `at least ${floor} ms, the floor: more often costs an idle service much of a core`,
      floor,
      floor,
    );
  }
  integer('OTEL_METRIC_EXPORT_TIMEOUT', 1, MAX_TIMER_MS, `the default ${String(DEFAULT_METRIC_TIMEOUT_MS)}`);

  // The batch span processor lifeline builds: sizes >= 1, the batch at most the queue, delays a timer can hold.
  // A batch size of 0 makes the processor's flush loop forever and wedges the process at shutdown.
  const queue = integer('OTEL_BSP_MAX_QUEUE_SIZE', 1, Number.MAX_SAFE_INTEGER, 'the default') ?? DEFAULT_QUEUE_SIZE;
  const batch = integer('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 1, Number.MAX_SAFE_INTEGER, 'the default');
  if (batch !== undefined && batch > queue)
    invalid('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', String(batch), `at most the queue size ${String(queue)}`, 'the default', null);
  integer('OTEL_BSP_SCHEDULE_DELAY', 0, MAX_TIMER_MS, 'the default');
  integer('OTEL_BSP_EXPORT_TIMEOUT', 0, MAX_TIMER_MS, 'the default');

  // lifeline installs its own propagator; the SDK never reads OTEL_PROPAGATORS then.
  const propagators = given(env, 'OTEL_PROPAGATORS');
  const ignored = propagators
    ?.split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '' && !PROPAGATED.includes(name));
  if (propagators !== undefined && ignored !== undefined && ignored.length > 0) {
    const shown = redacted(propagators);
    found.push({
      variable: 'OTEL_PROPAGATORS',
      value: shown,
      used: 'tracecontext,baggage',
      replacement: undefined,
      message: `lifeline: OTEL_PROPAGATORS=${JSON.stringify(shown)} is not used (${ignored.map((name) => JSON.stringify(redacted(name))).join(', ')} not supported); using tracecontext,baggage and lifeline's deadline header`,
    });
  }

  // Valid, but a catalog ticking faster than once a second gives its ticks deadlines that short.
  const healthInterval = healthIntervalOrNone(env);
  if (healthInterval !== undefined && healthInterval < DOUBTFUL_HEALTH_INTERVAL_MS) {
    const ms = String(healthInterval);
    found.push({
      variable: 'LIFELINE_HEALTH_INTERVAL_MS',
      value: ms,
      used: ms,
      replacement: undefined,
      message: `lifeline: LIFELINE_HEALTH_INTERVAL_MS=${ms} is below 1000: every tick gets a ${ms} ms deadline (seconds typed as milliseconds?); using ${ms}`,
    });
  }
  return found;
}

/** `env` as the SDK is to read it: each correction's replacement in place of the value set. */
export function correctedEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const copy = { ...env };
  for (const { variable, replacement } of envCorrections(env)) if (replacement !== undefined) set(copy, variable, replacement);
  return copy;
}

/**
 * Whether `OTEL_LOGS_EXPORTER` or `OTEL_METRICS_EXPORTER` (as the SDK is handed it) asks for an
 * exporter: set, and without `none`, which turns that signal off in OpenTelemetry's SDK wherever it
 * appears in the list.
 */
export function exporterAskedFor(variable: 'OTEL_LOGS_EXPORTER' | 'OTEL_METRICS_EXPORTER', env: NodeJS.ProcessEnv = process.env): boolean {
  const names = (correctedEnv(env)[variable] ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  return names.length > 0 && !names.includes('none');
}

/**
 * Runs `make` (a constructor of the SDK or an exporter, which read `process.env` themselves) with
 * `process.env` corrected, and puts the values back before returning: the app sees its environment
 * as it set it. Synchronous, so nothing else runs in between.
 */
export function withCorrectedEnv<T>(make: () => T): T {
  const saved: [string, string | undefined][] = [];
  for (const { variable, replacement } of envCorrections(process.env)) {
    if (replacement === undefined) continue;
    saved.push([variable, process.env[variable]]);
    set(process.env, variable, replacement);
  }
  try {
    return make();
  } finally {
    for (const [variable, value] of saved.reverse()) set(process.env, variable, value ?? null);
  }
}

const said = new Set<string>();

/**
 * Says each of `corrections` (default: all of `process.env`'s) as one warning through `logger`,
 * once per variable and value in the process, however often lifeline reads the environment.
 */
export function warnEnvCorrections(logger: Logger, corrections: readonly EnvCorrection[] = envCorrections()): void {
  for (const { variable, value, used, message } of corrections) {
    const key = `${variable}=${value}`;
    if (said.has(key)) continue;
    said.add(key);
    logger.warn({ variable, value, used }, message);
  }
}

/** Sets `variable` in `env`, or (`null`) unsets it. */
function set(env: NodeJS.ProcessEnv, variable: string, value: string | null): void {
  if (value === null) Reflect.deleteProperty(env, variable);
  else env[variable] = value;
}

/** A value as set, trimmed; blank is unset. */
function given(env: NodeJS.ProcessEnv, name: string, fallback?: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? fallback : value;
}

/** As the OTLP exporters accept it: an http(s) URL; for gRPC also `host:port` (https assumed) or `unix:`. */
function endpointValid(value: string, grpc: boolean): boolean {
  const url = grpc && !/^\w{1,8}:\/\//.test(value) ? `https://${value}` : value;
  try {
    const { protocol, hostname } = new URL(url);
    return ((protocol === 'http:' || protocol === 'https:') && hostname !== '') || (grpc && protocol === 'unix:');
  } catch {
    return false;
  }
}

let redactor: Redactor | undefined;

function redacted(value: string): string {
  redactor ??= new Redactor();
  // Redacted whole, then cut: cut first, a credential's `@host` could fall past the cut, and the
  // credential with it out of the rule's sight.
  return redactor.text(value).slice(0, 64);
}

/** The interval the variable sets, by its one rule; `undefined` when unset or invalid (the start fails on that, naming it). */
function healthIntervalOrNone(env: NodeJS.ProcessEnv): number | undefined {
  try {
    return healthIntervalFromEnv(env);
  } catch {
    return undefined;
  }
}
