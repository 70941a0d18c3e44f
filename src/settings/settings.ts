import { allows, expectation, LifelineError, MAX_TIMER_MS, numberOption, type NumberRule } from '../errors/index.js';

/**
 * A numeric setting, written once: the option that takes it, the `LIFELINE_*` variable that sets it
 * in register mode, and the values both accept. The option and the variable cannot drift apart:
 * each is checked against this one rule, and each error names what the user wrote.
 */
export interface NumberSetting extends NumberRule {
  /** The option, as its error names it (`diagnostics.stuckAfterMs`). */
  readonly option: string;
  /** The variable. */
  readonly env: string;
}

// The largest budget a deadline takes: a Date can still hold it once added to now (about 31,700
// years), and the deadline's timer is re-armed past MAX_TIMER_MS.
const MAX_BUDGET_MS = 1e15;

/** Every numeric setting that has both an option and a variable. */
export const SETTINGS = {
  probePort: { option: 'port', env: 'LIFELINE_PROBE_PORT', min: 0, max: 65_535, integer: true },
  // At least the watchdog's least threshold, which defaults to the interval.
  healthInterval: { option: 'interval', env: 'LIFELINE_HEALTH_INTERVAL_MS', min: 10, max: MAX_TIMER_MS, unit: 'ms' },
  defaultTimeout: { option: 'defaultTimeoutMs', env: 'LIFELINE_DEFAULT_TIMEOUT_MS', min: 0, above: true, max: MAX_BUDGET_MS, unit: 'ms' },
  headersTimeout: { option: 'headersTimeoutMs', env: 'LIFELINE_HEADERS_TIMEOUT_MS', min: 0, max: MAX_BUDGET_MS, unit: 'ms' },
  stuckAfter: { option: 'diagnostics.stuckAfterMs', env: 'LIFELINE_STUCK_AFTER_MS', min: 1, max: MAX_TIMER_MS, unit: 'ms' },
  exportBufferSpans: { option: 'exportBuffer.maxSpans', env: 'LIFELINE_EXPORT_BUFFER_SPANS', min: 1, max: 10_000_000, integer: true },
  exportBufferBytes: { option: 'exportBuffer.maxBytes', env: 'LIFELINE_EXPORT_BUFFER_BYTES', min: 1, max: 2 ** 40, integer: true },
  probeMaxConnections: { option: 'maxConnections', env: 'LIFELINE_PROBE_MAX_CONNECTIONS', min: 1, max: 1_000_000, integer: true },
  probeMaxConnectionsPerAddress: {
    option: 'maxConnectionsPerAddress',
    env: 'LIFELINE_PROBE_MAX_CONNECTIONS_PER_ADDRESS',
    min: 1,
    max: 1_000_000,
    integer: true,
  },
  probeMaxOverflowConnections: {
    option: 'maxOverflowConnections',
    env: 'LIFELINE_PROBE_MAX_OVERFLOW_CONNECTIONS',
    min: 0,
    max: 1_000_000,
    integer: true,
  },
  probeMaxRequestsPerSecond: {
    option: 'maxRequestsPerSecond',
    env: 'LIFELINE_PROBE_MAX_REQUESTS_PER_SECOND',
    min: 0,
    above: true,
    max: 10_000_000,
  },
  watchdogThreshold: { option: 'watchdog.thresholdMs', env: 'LIFELINE_WATCHDOG_THRESHOLD_MS', min: 10, max: MAX_TIMER_MS, unit: 'ms' },
} as const satisfies Record<string, NumberSetting>;

/** `value` if the setting allows it, else an `ERR_INVALID_OPTION` error naming the option. */
export function settingOption(setting: NumberSetting, value: unknown): number {
  return numberOption(setting.option, value, setting);
}

/**
 * The variable's text as a value the setting allows, else an `ERR_INVALID_OPTION` error naming the
 * variable; `undefined` for no text. Decimal digits only (a fraction where the setting takes one):
 * no sign, exponent or hex, so `1e3` or `0x10` cannot slip through `Number`.
 */
export function settingFromEnv(setting: NumberSetting, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = (setting.integer === true ? /^\d{1,16}$/ : /^\d{1,16}(\.\d{1,9})?$/).test(text) ? Number(text) : Number.NaN;
  if (allows(setting, n)) return n;
  throw new LifelineError('ERR_INVALID_OPTION', `invalid ${setting.env}=${JSON.stringify(text)} (expected ${expectation(setting)})`);
}
