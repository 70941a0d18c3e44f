import { LifelineError } from '../errors/index.js';
import { DEFAULT_MAX_INBOUND_MS, isAddressOrRange, type TrustInbound } from '../inbound/index.js';
import { hostEntry } from '../net/index.js';
import { SETTINGS, settingFromEnv, type NumberSetting } from '../settings/index.js';

/** lifeline's own settings read from the environment; `OTEL_*` is the NodeSDK's. */
export interface EnvConfig {
  /** `false` when `LIFELINE_PROBE_PORT=0`. */
  probe: false | { port?: number; host?: string };
  healthIntervalMs?: number;
  defaultTimeoutMs?: number;
  diagnosticsLog?: 'debug' | 'info';
  /** `LIFELINE_STUCK_AFTER_MS`: a request or call with no deadline in flight this long is exported as stuck (`diagnostics.stuckAfterMs`). */
  stuckAfterMs?: number;
  logLevel?: string;
  /** `LIFELINE_INBOUND_DEADLINES`: whose inbound deadlines are obeyed (`DeadlinePropagator`'s and gRPC's `trustInbound`). */
  inboundDeadlines?: TrustInbound;
  /** `LIFELINE_MIN_INBOUND_MS`: inbound budgets below it are raised to it (`minInboundMs`). */
  minInboundMs?: number;
  /** `LIFELINE_ESM_HOOK`: register the ES module loader hook (default on). */
  esmHook: boolean;
  /** `LIFELINE_AUTO_INSTRUMENTATIONS`: use the app's auto-instrumentations package when installed (default on). */
  autoInstrumentations: boolean;
  /** `LIFELINE_HEADERS_TIMEOUT_MS`: the bound on calls nothing else bounds, until their response headers; 0 = none. */
  headersTimeoutMs: number;
  /** `LIFELINE_DEADLINE_HEADER_HOSTS`: the hosts told of a call's deadline (`deadlineHeaderHosts`). */
  deadlineHeaderHosts?: 'internal' | 'all' | 'none' | string[];
  /** `LIFELINE_ENVOY_UPSTREAM_TIMEOUT=on`: calls to those hosts also carry Envoy's `x-envoy-upstream-rq-timeout-ms` (`envoyUpstreamTimeout`). */
  envoyUpstreamTimeout: boolean;
  /** `LIFELINE_GRPC_HEALTH=off`: no `grpc.health.v1.Health` on the app's grpc-js servers (`grpcHealth`). */
  grpcHealth: boolean;
  /** `LIFELINE_EXPORT_BUFFER_SPANS`, `LIFELINE_EXPORT_BUFFER_BYTES`: what is kept for a retry (`exportBuffer`). */
  exportBuffer: { maxSpans?: number; maxBytes?: number };
  /** `LIFELINE_PROBE_MAX_CONNECTIONS`, `LIFELINE_PROBE_MAX_CONNECTIONS_PER_ADDRESS`, `LIFELINE_PROBE_MAX_OVERFLOW_CONNECTIONS`, `LIFELINE_PROBE_MAX_REQUESTS_PER_SECOND`: the probe server's limits. */
  probeLimits: {
    maxConnections?: number;
    maxConnectionsPerAddress?: number;
    maxOverflowConnections?: number;
    maxRequestsPerSecond?: number;
  };
  /**
   * `LIFELINE_WATCHDOG=off`: no watchdog thread; `on`, or `LIFELINE_WATCHDOG_THRESHOLD_MS` set: one
   * (with that threshold). Neither set: `undefined`, register mode's default.
   */
  watchdog: false | { thresholdMs?: number } | undefined;
  /** `LIFELINE_EVIDENCE=off`: the sampler alone decides what is exported (startLifeline's `evidence: false`). */
  evidence: boolean;
}

/** Whether this process runs in a Kubernetes pod: the kubelet sets `KUBERNETES_SERVICE_HOST` in every container. */
export function inKubernetes(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.KUBERNETES_SERVICE_HOST ?? '') !== '';
}

/** The probe server's port when none is chosen (`LIFELINE_PROBE_PORT`, `probe.port`, `startProbeServer`'s `port`). */
export const DEFAULT_PROBE_PORT = 5555;

/** Register mode's bound on calls nothing else bounds: connect, send, and wait for the response headers. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 60_000;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const SWITCH = ['on', 'off'] as const;

/**
 * Reads and validates `LIFELINE_*`. An invalid value throws a `LifelineError` naming the variable
 * and the value: a misconfigured service should fail at start, not run half-configured.
 */
export function readEnvConfig(env: NodeJS.ProcessEnv = process.env): EnvConfig {
  const port = setting(env, SETTINGS.probePort);
  const probeHost = host(env, 'LIFELINE_PROBE_HOST');
  const healthIntervalMs = healthIntervalFromEnv(env);
  const defaultTimeoutMs = setting(env, SETTINGS.defaultTimeout);
  const diagnosticsLog = oneOfEnv(env, 'LIFELINE_DIAGNOSTICS_LOG', ['debug', 'info'] as const);
  const stuckAfterMs = setting(env, SETTINGS.stuckAfter);
  const logLevel = oneOfEnv(env, 'LIFELINE_LOG_LEVEL', LOG_LEVELS);
  const inboundDeadlines = trustFromEnv(env, 'LIFELINE_INBOUND_DEADLINES');
  // The option's bound is maxInboundMs, which register mode leaves at its default.
  const minInboundMs = integer(env, 'LIFELINE_MIN_INBOUND_MS', 0, DEFAULT_MAX_INBOUND_MS);
  const esmHook = oneOfEnv(env, 'LIFELINE_ESM_HOOK', SWITCH) ?? 'on';
  const autoInstrumentations = oneOfEnv(env, 'LIFELINE_AUTO_INSTRUMENTATIONS', SWITCH) ?? 'on';
  const headersTimeoutMs = setting(env, SETTINGS.headersTimeout) ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const deadlineHeaderHosts = headerHostsFromEnv(env, 'LIFELINE_DEADLINE_HEADER_HOSTS');
  const envoyUpstreamTimeout = oneOfEnv(env, 'LIFELINE_ENVOY_UPSTREAM_TIMEOUT', SWITCH) ?? 'off';
  const grpcHealth = oneOfEnv(env, 'LIFELINE_GRPC_HEALTH', SWITCH) ?? 'on';
  const maxSpans = setting(env, SETTINGS.exportBufferSpans);
  const maxBytes = setting(env, SETTINGS.exportBufferBytes);
  const maxConnections = setting(env, SETTINGS.probeMaxConnections);
  const maxConnectionsPerAddress = setting(env, SETTINGS.probeMaxConnectionsPerAddress);
  const maxOverflowConnections = setting(env, SETTINGS.probeMaxOverflowConnections);
  const maxRequestsPerSecond = setting(env, SETTINGS.probeMaxRequestsPerSecond);
  const watchdog = oneOfEnv(env, 'LIFELINE_WATCHDOG', SWITCH);
  const thresholdMs = setting(env, SETTINGS.watchdogThreshold);
  const evidence = oneOfEnv(env, 'LIFELINE_EVIDENCE', SWITCH) ?? 'on';
  return {
    evidence: evidence === 'on',
    watchdog: watchdog === 'off' ? false : thresholdMs !== undefined ? { thresholdMs } : watchdog === 'on' ? {} : undefined,
    exportBuffer: { ...(maxSpans === undefined ? {} : { maxSpans }), ...(maxBytes === undefined ? {} : { maxBytes }) },
    probeLimits: {
      ...(maxConnections === undefined ? {} : { maxConnections }),
      ...(maxConnectionsPerAddress === undefined ? {} : { maxConnectionsPerAddress }),
      ...(maxOverflowConnections === undefined ? {} : { maxOverflowConnections }),
      ...(maxRequestsPerSecond === undefined ? {} : { maxRequestsPerSecond }),
    },
    esmHook: esmHook === 'on',
    autoInstrumentations: autoInstrumentations === 'on',
    headersTimeoutMs,
    envoyUpstreamTimeout: envoyUpstreamTimeout === 'on',
    grpcHealth: grpcHealth === 'on',
    ...(deadlineHeaderHosts === undefined ? {} : { deadlineHeaderHosts }),
    probe: port === 0 ? false : { ...(port === undefined ? {} : { port }), ...(probeHost === undefined ? {} : { host: probeHost }) },
    ...(healthIntervalMs === undefined ? {} : { healthIntervalMs }),
    ...(defaultTimeoutMs === undefined ? {} : { defaultTimeoutMs }),
    ...(diagnosticsLog === undefined ? {} : { diagnosticsLog }),
    ...(stuckAfterMs === undefined ? {} : { stuckAfterMs }),
    ...(logLevel === undefined ? {} : { logLevel }),
    ...(inboundDeadlines === undefined ? {} : { inboundDeadlines }),
    ...(minInboundMs === undefined ? {} : { minInboundMs }),
  };
}

/**
 * `LIFELINE_HEALTH_INTERVAL_MS` alone: the one setting the core entry reads (for the process-wide
 * catalog), so that importing lifeline never fails on a setting only register mode uses. Below 1000
 * it is taken but warned about (`envCorrections`).
 */
export function healthIntervalFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  return setting(env, SETTINGS.healthInterval);
}

/** `internal`, `all`, `none`, or a comma-separated list of host names, `.suffix`es and `internal`. */
function headerHostsFromEnv(env: NodeJS.ProcessEnv, name: string): EnvConfig['deadlineHeaderHosts'] {
  const value = raw(env, name);
  if (value === undefined || value === 'internal' || value === 'all' || value === 'none') return value;
  const entries = value.split(',').map((entry) => entry.trim().toLowerCase());
  // The grammar deadlineHeaderHosts checks again: an entry passing here never fails the start there.
  const bad = entries.find((entry) => hostEntry(entry) === undefined);
  if (bad !== undefined)
    throw invalidEnv(
      name,
      value,
      `internal, all, none, or comma-separated host names, .suffixes and IP addresses (${JSON.stringify(bad)} is none of them)`,
    );
  return entries;
}

function raw(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** What {@link envInteger} found: nothing set, an integer in range, or a value that is neither. */
export type EnvInteger = { readonly value: number | undefined } | { readonly invalid: string; readonly expected: string };

/**
 * The one rule for a numeric setting: decimal digits only (no sign, fraction, exponent or hex, so
 * `1e3` or `0x10` cannot slip through `Number`), from `min` to `max`. Unset or blank is no value.
 * Callers choose what an invalid value costs: `LIFELINE_*` fail the start, `OTEL_*` warn and fall
 * back to the default as the OpenTelemetry SDK does.
 */
export function envInteger(env: NodeJS.ProcessEnv, name: string, min: number, max: number): EnvInteger {
  const value = raw(env, name);
  if (value === undefined) return { value: undefined };
  // Bounded before Number(): 16 digits already exceed any max a caller passes.
  const n = /^\d{1,16}$/.test(value) ? Number(value) : Number.NaN;
  return n >= min && n <= max ? { value: n } : { invalid: value, expected: `an integer from ${String(min)} to ${String(max)}` };
}

/** A numeric setting's variable, by the rule its option follows too (src/settings). */
function setting(env: NodeJS.ProcessEnv, numeric: NumberSetting): number | undefined {
  return settingFromEnv(numeric, raw(env, numeric.env));
}

function integer(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const result = envInteger(env, name, min, max);
  if ('invalid' in result) throw invalidEnv(name, result.invalid, result.expected);
  return result.value;
}

function host(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = raw(env, name);
  if (value !== undefined && !/^[A-Za-z0-9.:_-]+$/.test(value)) throw invalidEnv(name, value, 'a host name or an IP address');
  return value;
}

function oneOfEnv<T extends string>(env: NodeJS.ProcessEnv, name: string, allowed: readonly T[]): T | undefined {
  const value = raw(env, name);
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw invalidEnv(name, value, `one of ${allowed.join(', ')}`);
  return value as T;
}

/** `private`, `all`, `none`, or a comma-separated list of IP addresses and CIDR ranges. */
function trustFromEnv(env: NodeJS.ProcessEnv, name: string): TrustInbound | undefined {
  const value = raw(env, name);
  if (value === undefined || value === 'private' || value === 'all' || value === 'none') return value;
  const entries = value.split(',').map((entry) => entry.trim());
  const bad = entries.find((entry) => !isAddressOrRange(entry));
  if (bad !== undefined)
    throw invalidEnv(
      name,
      value,
      `private, all, none, or comma-separated IP addresses and CIDR ranges (${JSON.stringify(bad)} is neither)`,
    );
  return entries;
}

function invalidEnv(name: string, value: string, expected: string): LifelineError {
  return new LifelineError('ERR_INVALID_OPTION', `invalid ${name}=${JSON.stringify(value)} (expected ${expected})`);
}
