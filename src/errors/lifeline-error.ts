/** Error codes carried by {@link LifelineError}. */
export type LifelineErrorCode =
  | 'ERR_INVALID_OPTION'
  | 'ERR_DUPLICATE_COMPONENT'
  | 'ERR_NOT_REGISTERED'
  | 'ERR_CLOSED'
  | 'ERR_TICK_ALREADY_RUN'
  | 'ERR_ALREADY_STARTED'
  | 'ERR_UNSUPPORTED_NODE'
  | 'ERR_WATCHDOG_UNAVAILABLE';

/** The error lifeline throws for misuse of its API; `code` says which misuse. */
export class LifelineError extends Error {
  /** Always `LifelineError`. */
  override readonly name = 'LifelineError';
  /** Which misuse it was: `ERR_INVALID_OPTION` for an option out of its bounds, say. */
  readonly code: LifelineErrorCode;

  constructor(code: LifelineErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/** An `ERR_INVALID_OPTION` error whose message names the option and the value given. */
export function invalidOption(option: string, value: unknown, expected: string): LifelineError {
  return new LifelineError('ERR_INVALID_OPTION', `invalid ${option}: ${describe(value)} (expected ${expected})`);
}

/** `value` if it is one of `allowed`, else an `ERR_INVALID_OPTION` error naming the option. */
export function oneOf<T extends string>(option: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  throw invalidOption(option, value, allowed.map((a) => `'${a}'`).join(', '));
}

/** The largest delay a Node timer takes (2³¹ − 1 ms): a longer one fires at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** What a numeric option must be. */
export interface NumberRule {
  /** The least value allowed; with `above`, values must be greater than it. */
  readonly min: number;
  readonly above?: boolean;
  /** The greatest value allowed (default: any finite number). */
  readonly max?: number;
  /** Whole numbers only (safe integers). */
  readonly integer?: boolean;
  /** What the number counts, for the error message: `'ms'`. */
  readonly unit?: 'ms';
}

/** `value` if it is a number the rule allows, else an `ERR_INVALID_OPTION` error naming the option and the rule. */
export function numberOption(option: string, value: unknown, rule: NumberRule): number {
  if (allows(rule, value)) return value;
  throw invalidOption(option, value, expectation(rule));
}

/** Whether `value` is a number `rule` allows. */
export function allows(rule: NumberRule, value: unknown): value is number {
  const { min, above = false, max = Number.MAX_VALUE, integer = false } = rule;
  return (
    typeof value === 'number' &&
    (above ? value > min : value >= min) &&
    value <= max &&
    (integer ? Number.isSafeInteger(value) : Number.isFinite(value))
  );
}

/** What `rule` allows, as its errors say it: `a number of ms > 0 and at most 2147483647`. */
export function expectation(rule: NumberRule): string {
  const what = rule.integer === true ? 'an integer' : rule.unit === 'ms' ? 'a number of ms' : 'a number';
  const most = rule.max === undefined ? '' : ` and at most ${String(rule.max)}`;
  return `${what} ${rule.above === true ? '>' : '≥'} ${String(rule.min)}${most}`;
}

/** What a caught value says, for a log line: an error's message, a thrown string, else its type. */
export function errorText(thrown: unknown): string {
  if (thrown instanceof Error) return thrown.message;
  return typeof thrown === 'string' ? thrown : typeof thrown;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === undefined || value === null) return String(value);
  if (value instanceof Date) return `Date(${Number.isNaN(value.getTime()) ? 'Invalid' : value.toISOString()})`;
  return typeof value;
}
