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
  override readonly name = 'LifelineError';
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

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === undefined || value === null) return String(value);
  if (value instanceof Date) return `Date(${Number.isNaN(value.getTime()) ? 'Invalid' : value.toISOString()})`;
  return typeof value;
}
