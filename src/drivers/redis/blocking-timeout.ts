/**
 * Redis' blocking commands: where each carries the time the server waits, so that a deadline can
 * shorten that wait on the server. Cutting a `BLPOP key 0` only on the client would leave the
 * server blocking the connection (and every command pipelined behind it) for good.
 */

/** Where a blocking command's timeout is: the index of its argument, and its unit. */
export interface BlockingTimeout {
  readonly index: number;
  readonly unit: 's' | 'ms';
}

type Arg = string | Buffer | number;

/** Timeout last, in seconds (decimals since Redis 6). */
const LAST_SECONDS = new Set(['blpop', 'brpop', 'brpoplpush', 'blmove', 'bzpopmin', 'bzpopmax']);
/** Timeout first, in seconds. */
const FIRST_SECONDS = new Set(['blmpop', 'bzmpop']);

/** Every command whose name says it may block: a cheap first check before the arguments are read. */
const BLOCKING = new Set([...LAST_SECONDS, ...FIRST_SECONDS, 'xread', 'xreadgroup', 'wait', 'waitaof']);

/** True when `name` (any case) is a command that may block the connection on the server. */
export function mayBlock(name: string): boolean {
  return BLOCKING.has(name.toLowerCase());
}

/**
 * The timeout argument of the blocking command `name` called with `args` (the arguments after the
 * name), or `undefined` when it does not block (`XREAD` without `BLOCK`) or is not one.
 */
export function blockingTimeoutOf(name: string, args: readonly Arg[]): BlockingTimeout | undefined {
  const command = name.toLowerCase();
  if (LAST_SECONDS.has(command)) return args.length === 0 ? undefined : { index: args.length - 1, unit: 's' };
  if (FIRST_SECONDS.has(command)) return args.length === 0 ? undefined : { index: 0, unit: 's' };
  if (command === 'wait') return args.length < 2 ? undefined : { index: 1, unit: 'ms' };
  if (command === 'waitaof') return args.length < 3 ? undefined : { index: 2, unit: 'ms' };
  if (command === 'xread' || command === 'xreadgroup') {
    // Options come before STREAMS; a key named "BLOCK" after it is a key.
    for (let index = 0; index < args.length - 1; index++) {
      const word = String(args[index]).toUpperCase();
      if (word === 'STREAMS') return undefined;
      if (word === 'BLOCK') return { index: index + 1, unit: 'ms' };
    }
  }
  return undefined;
}

/**
 * The timeout to send instead of `value` (`unit`) so that the server ends its wait once
 * `remainingMs` have passed, or `undefined` to send `value` as it is (it already ends sooner).
 * `0` means "forever" to Redis, so it is always replaced. Rounded up to the millisecond, never
 * below 1 ms: the server ends its wait just after the deadline, not before the caller is told.
 */
export function shortenedTimeout(value: Arg, unit: 's' | 'ms', remainingMs: number): string | undefined {
  const given = Number(String(value));
  if (!Number.isFinite(given) || given < 0) return undefined; // the server's own error says what is wrong
  const givenMs = unit === 's' ? given * 1_000 : given;
  const budgetMs = Math.max(1, Math.ceil(remainingMs));
  if (givenMs !== 0 && givenMs <= budgetMs) return undefined;
  return unit === 's' ? (budgetMs / 1_000).toFixed(3) : String(budgetMs);
}

// The server's wait is the time left rounded up to the millisecond, from when it read the command:
// its nil reply cannot come before the deadline by more than clock granularity.
const CLOCK_SLACK_MS = 2;

/**
 * Whether `reply` is the server ending, at the deadline, a blocking command whose wait lifeline
 * shortened: a nil reply at (or just before, by clock granularity) the deadline's time. The deadline's
 * own timer may not have fired yet (it shares the event loop with the socket's read), and the caller
 * must get the `DeadlineExceededError` either way, not the nil of a wait it never asked to shorten.
 */
export function endedByDeadline(reply: unknown, monotonicAt: number, now: number): boolean {
  return reply === null && now >= monotonicAt - CLOCK_SLACK_MS;
}
