import { context, createContextKey, type Context } from '@opentelemetry/api';
import { invalidOption } from '../errors/index.js';
import { defaultLogger, logSwallowed } from '../log/index.js';
import { isoTime } from '../semconv/index.js';
import { monotonicNow, monotonicOf } from './clock.js';
import { ensureContextManager } from './context-manager.js';
import { DeadlineExceededError, type DeadlineSource } from './deadline-exceeded-error.js';
import { DeadlineTimer, type DeadlineWatch } from './deadline-timer.js';

/** The deadline in force for the current work. */
export interface Deadline {
  /** The deadline, epoch ms. */
  readonly at: number;
  /** Where it came from. */
  readonly source: DeadlineSource;
  /** Whole milliseconds left (rounded up), never negative; measured on the monotonic clock, so a step of the wall clock does not change it. */
  remainingMs(): number;
  /**
   * Aborts at the deadline with a {@link DeadlineExceededError} reason, for APIs that take a
   * signal. Created on first read, with an unref-ed timer that ends at the deadline (a tick's ends
   * earlier, when its `run` settles).
   */
  readonly signal: AbortSignal;
}

const DEADLINE_KEY = createContextKey('lifeline.deadline');
/** Scopes whose last waiting call settled this turn of the event loop (see {@link DeadlineScope.unwatch}). */
const idleScopes: DeadlineScope[] = [];
/** Whether a sweep of {@link idleScopes} is due at the end of this turn. */
let sweepScheduled = false;
/** Idle scopes held at most before they are swept without waiting for the end of the turn. */
const MAX_IDLE_SCOPES = 4_096;
/** The last instant a `Date` can hold: deadlines beyond it cannot be formatted or compared sanely. */
export const MAX_DEADLINE_MS = 8.64e15;

/**
 * One deadline and its lazily created signal. Most deadlines are only compared, never awaited, so
 * no timer or AbortController exists until someone reads `signal`. `at` (epoch ms) is for display;
 * `monotonicAt` is what remaining time, comparisons and timers use (see `clock.ts`).
 */
export class DeadlineScope implements Deadline {
  readonly at: number;
  readonly source: DeadlineSource;
  /** The deadline's monotonic reading: taken when it was made, unmoved by wall-clock steps. */
  readonly monotonicAt: number;
  #controller: AbortController | undefined;
  #timer: DeadlineTimer<DeadlineScope> | undefined;
  #released = false;
  /** Calls waiting for this deadline (see {@link DeadlineScope.watch}); the timer runs while there are any, or a signal. */
  #watchers: Watcher<unknown> | undefined;
  /** Waiting in {@link idleScopes} for its timer to be stopped, unless a call waits on it again first. */
  #idle = false;
  #atText: string | undefined;
  /**
   * @internal What a call under this deadline is bound by, as the policy's `callDeadline` describes it:
   * the same for every call under it, so made once (calls are the hot path).
   */
  asCall: object | undefined;

  /** @param at - epoch ms; `monotonicAt` - its monotonic reading when the caller took both clocks itself. */
  constructor(at: number, source: DeadlineSource, monotonicAt: number = monotonicOf(at)) {
    this.at = at;
    this.source = source;
    this.monotonicAt = monotonicAt;
  }

  /** A deadline `ms` from now, both readings taken now. */
  static after(ms: number, source: DeadlineSource): DeadlineScope {
    return new DeadlineScope(Date.now() + ms, source, monotonicNow() + ms);
  }

  remainingMs(): number {
    return Math.max(0, Math.ceil(this.monotonicAt - monotonicNow()));
  }

  /** @internal `at` as ISO-8601, formatted once: every span under this deadline records the same text. */
  get atText(): string {
    return (this.#atText ??= isoTime(this.at));
  }

  /** True once the deadline has passed. */
  passed(): boolean {
    return this.monotonicAt - monotonicNow() < 0;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      // Read after the deadline, the signal is already aborted; before it, it aborts when it comes.
      if (this.monotonicAt - monotonicNow() <= 0) this.#controller.abort(new DeadlineExceededError(this.at, this.source));
      else if (!this.#released) this.#arm();
    }
    return this.#controller.signal;
  }

  /**
   * Calls `onExpire(subject)` once this deadline has passed, never before and always
   * asynchronously, unless cancelled first: the call's share of the deadline's one timer. Every call
   * under one deadline (a request's, a tick's) waits on the same timer, which runs only while one
   * of them does; a watch costs a list link instead of a timer of its own. At the deadline the
   * newest watch is told first; one that throws does not keep the others from being told.
   */
  watch<S>(onExpire: (subject: S) => void, subject: S): DeadlineWatch {
    const watcher = new Watcher<S>(this, onExpire, subject, this.#watchers);
    if (this.#watchers !== undefined) this.#watchers.previous = watcher as Watcher<unknown>;
    this.#watchers = watcher as Watcher<unknown>;
    this.#arm();
    return watcher;
  }

  /** Stops the signal's share of the timer: the work this deadline bounded has settled. Idempotent. */
  release(): void {
    this.#released = true;
    if (this.#watchers === undefined) this.#disarm();
  }

  #arm(): void {
    this.#timer ??= new DeadlineTimer<DeadlineScope>(this.at, DeadlineScope.#expire, this, this.monotonicAt);
  }

  #disarm(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  /**
   * @internal For {@link Watcher} only: `watcher` was cancelled; out of the list, and the timer
   * stops once nothing has waited since, at the end of this turn of the event loop: the calls of
   * one request or tick come one after another (a query answered, the next one sent from its
   * continuation), and each would otherwise start and stop a timer of its own.
   */
  static unwatch(scope: DeadlineScope, watcher: Watcher<unknown>): void {
    const { previous, next } = watcher;
    if (previous === undefined) scope.#watchers = next;
    else previous.next = next;
    if (next !== undefined) next.previous = previous;
    if (
      scope.#watchers === undefined &&
      scope.#timer !== undefined &&
      !scope.#idle &&
      (scope.#controller === undefined || scope.#released)
    ) {
      scope.#idle = true;
      idleScopes.push(scope);
      // Swept at once past a cap: a turn that never ends (fake timers dropped the sweep) must not hold them all.
      if (idleScopes.length >= MAX_IDLE_SCOPES) DeadlineScope.#sweep();
      else if (!sweepScheduled) {
        sweepScheduled = true;
        setImmediate(DeadlineScope.#sweep).unref();
      }
    }
  }

  /** Stops the timers of the scopes nothing has waited on since they became idle (see {@link DeadlineScope.unwatch}). */
  static #sweep(): void {
    sweepScheduled = false;
    for (const scope of idleScopes.splice(0)) {
      scope.#idle = false;
      if (scope.#watchers === undefined && (scope.#controller === undefined || scope.#released)) scope.#disarm();
    }
  }

  static #expire(scope: DeadlineScope): void {
    scope.#timer = undefined;
    // Taken off the list before any is called: an onExpire that cancels another's watch (or its own) changes nothing.
    const expired: Watcher<unknown>[] = [];
    for (let watcher = scope.#watchers; watcher !== undefined; watcher = watcher.next) expired.push(watcher);
    for (const watcher of expired) watcher.unlink();
    scope.#watchers = undefined;
    if (!scope.#released) scope.#controller?.abort(new DeadlineExceededError(scope.at, scope.source));
    for (const watcher of expired) {
      try {
        watcher.expire();
      } catch (error) {
        // Every other call is still told; the error surfaces as it would from a timer of its own.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}

/** One call waiting on a deadline's timer: a link in its scope's list. */
class Watcher<S> implements DeadlineWatch {
  /** The scope whose list holds it; `undefined` once taken off (cancelled, or due). */
  #scope: DeadlineScope | undefined;
  /** False once cancelled or called. */
  #pending = true;
  readonly #onExpire: (subject: S) => void;
  readonly #subject: S;
  previous: Watcher<unknown> | undefined;
  next: Watcher<unknown> | undefined;

  constructor(scope: DeadlineScope, onExpire: (subject: S) => void, subject: S, next: Watcher<unknown> | undefined) {
    this.#scope = scope;
    this.#onExpire = onExpire;
    this.#subject = subject;
    this.next = next;
  }

  cancel(): void {
    this.#pending = false;
    const scope = this.#scope;
    if (scope === undefined) return;
    this.#scope = undefined;
    DeadlineScope.unwatch(scope, this as Watcher<unknown>);
  }

  /** Taken off its scope's list, which the deadline is emptying. */
  unlink(): void {
    this.#scope = undefined;
  }

  expire(): void {
    if (!this.#pending) return; // cancelled by an earlier watcher's onExpire
    this.#pending = false;
    this.#onExpire(this.#subject);
  }
}

/** The deadline carried by `ctx`, if any. */
export function deadlineOf(ctx: Context): DeadlineScope | undefined {
  return ctx.getValue(DEADLINE_KEY) as DeadlineScope | undefined;
}

/**
 * Whether a deadline at `monotonicAt` would shrink `current`: deadlines only shrink, so a later
 * one (or the same instant) changes nothing, not even the source. The one rule for every place
 * that puts a deadline under another.
 */
export function shrinks(current: { readonly monotonicAt: number } | undefined, monotonicAt: number): boolean {
  return current === undefined || monotonicAt < current.monotonicAt;
}

/** `ctx` carrying `scope` as its deadline. The caller keeps deadlines shrinking. */

export function contextWithDeadline(ctx: Context, scope: DeadlineScope): Context {
  return ctx.setValue(DEADLINE_KEY, scope);
}

/** The deadline in force for the current work, or `undefined` when nothing bounds it. */
export function currentDeadline(): Deadline | undefined {
  return deadlineOf(context.active());
}

/**
 * Runs `fn` with the deadline `min(current deadline, at)` in the OpenTelemetry context, so every
 * remote call made anywhere below it is bounded by it. Returns what `fn` returns.
 * @param at - epoch ms or a `Date`.
 * @throws LifelineError `ERR_INVALID_OPTION` when `at` is not a finite time.
 *
 * @example
 * ```ts
 * // The nightly export must be done by 06:00: every call it makes ends by then.
 * await withDeadline(new Date('2026-12-02T06:00:00Z'), () => exportReports());
 * ```
 */
export function withDeadline<T>(at: number | Date, fn: () => T): Started<T> {
  const ms = at instanceof Date ? at.getTime() : at;
  if (typeof ms !== 'number' || !(Math.abs(ms) <= MAX_DEADLINE_MS))
    throw invalidOption('deadline', at, 'an epoch-ms number or a valid Date');
  return runWithDeadline(ms, monotonicOf(ms), 'scope', fn);
}

/**
 * Runs `fn` with a deadline `ms` milliseconds from now (never later than the current one). A lazy
 * thenable `fn` returns (a knex query builder, a Prisma query) is started inside the deadline, and a
 * promise of its result is returned.
 * @throws LifelineError `ERR_INVALID_OPTION` when `ms` is negative or not finite.
 *
 * @example
 * ```ts
 * // At most 2 s for the price lookup, or less if the caller's deadline is nearer.
 * const price = await withTimeout(2_000, () => fetch(priceUrl).then((r) => r.json()));
 * ```
 */
export function withTimeout<T>(ms: number, fn: () => T): Started<T> {
  const now = Date.now();
  if (typeof ms !== 'number' || !(ms >= 0 && now + ms <= MAX_DEADLINE_MS))
    throw invalidOption('timeout', ms, 'a number of ms >= 0 ending within the range of a Date');
  return runWithDeadline(now + ms, monotonicNow() + ms, 'scope', fn);
}

/**
 * `ctx` without its deadline; its trace context, baggage and every other value stay. The context
 * counterpart of {@link withoutDeadline}, for code that passes contexts explicitly.
 */
export function contextWithoutDeadline(ctx: Context): Context {
  return deadlineOf(ctx) === undefined ? ctx : ctx.deleteValue(DEADLINE_KEY);
}

/**
 * Runs `fn` with no deadline, keeping everything else of the current context (the span, so work
 * below stays in the same trace, and baggage), like Go's `context.WithoutCancel`. Remote calls
 * below are bounded only by what they set themselves (a `withTimeout` inside works as anywhere) or
 * by the policy (`defaultTimeoutMs`, rules). For work that must outlive the deadline it was started
 * under: work after the response is sent, or a background loop started lazily inside a request or
 * a tick, which would otherwise keep that caller's deadline forever. Returns what `fn` returns.
 * @example
 * ```ts
 * app.post('/webhook', (req, res) => {
 *   res.sendStatus(202);
 *   void withoutDeadline(() => processEvent(req.body)); // not bound by the caller's x-request-timeout-ms
 * });
 * refresher ??= withoutDeadline(() => startTokenRefresher()); // started in a request, lives on its own
 * ```
 */
export function withoutDeadline<T>(fn: () => T): T {
  ensureContextManager();
  const active = context.active();
  const detached = contextWithoutDeadline(active);
  return detached === active ? fn() : context.with(detached, fn);
}

function runWithDeadline<T>(at: number, monotonicAt: number, source: DeadlineSource, fn: () => T): Started<T> {
  ensureContextManager();
  const active = context.active();
  const current = deadlineOf(active);
  if (!shrinks(current, monotonicAt)) return startedHere(fn());
  // No release when fn settles: most scopes never create a timer, and waiting on every result
  // would cost a promise per call on the hottest path. A signal read here lives to the deadline.
  return context.with(contextWithDeadline(active, new DeadlineScope(at, source, monotonicAt)), runStarted<T>, undefined, fn);
}

/** `fn`'s result, started ({@link startedHere}); passed to `context.with` rather than a closure made per call. */
function runStarted<T>(fn: () => T): Started<T> {
  return startedHere(fn());
}

/**
 * `result`, with a lazy thenable (a knex or Sequelize query builder, a Prisma query: their work starts
 * on `.then`) started now, inside the deadline's context, and a promise of it returned in its
 * place. Left alone, its `.then` would be called by the caller's `await`, outside the deadline,
 * and the query it sends would have none.
 */
function startedHere<T>(result: T): Started<T> {
  if (result instanceof Promise || !isThenable(result)) return result as Started<T>;
  return new Promise((resolve, reject) => {
    result.then(resolve, reject);
  }) as Started<T>;
}

/**
 * What {@link withDeadline} and {@link withTimeout} return for `fn`'s result `T`: `T` itself, except
 * that a thenable which is not a native promise (a query builder) is started and becomes a
 * `Promise` of its value.
 */
export type Started<T> = T extends Promise<unknown> ? T : T extends PromiseLike<infer U> ? Promise<U> : T;

/** How a piece of work ended. */
export type Settlement = { readonly failed: false } | { readonly failed: true; readonly error: unknown };

const FULFILLED: Settlement = { failed: false };

/**
 * Calls `run`, then `done` once its result has settled: at once for a plain value or a throw, after
 * the promise for a thenable. Returns the same value, rejection or throw. A thenable that is not a
 * native promise (a lazy query builder runs on every `.then`) is adopted once into a promise, and
 * that promise is returned, so its work runs once. `done` must not disturb the caller's result:
 * whatever it throws is dropped.
 */
export function runThenSettle<T>(run: () => T, done: (settlement: Settlement) => void): T {
  const safeDone = (settlement: Settlement): void => {
    try {
      done(settlement);
    } catch (error) {
      // Bookkeeping failed (a span that would not end, say): the user's result matters more, and it is said.
      logSwallowed(defaultLogger(), 'settling work run under a deadline', error);
    }
  };
  let result: T;
  try {
    result = run();
  } catch (error) {
    safeDone({ failed: true, error });
    throw error;
  }
  if (!isThenable(result)) {
    safeDone(FULFILLED);
    return result;
  }
  const promise = Promise.resolve(result);
  promise.then(
    () => {
      safeDone(FULFILLED);
    },
    (error: unknown) => {
      safeDone({ failed: true, error });
    },
  );
  return promise as T;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function'
  );
}
