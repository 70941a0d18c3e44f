import { MAX_TIMER_MS } from '../errors/index.js';
import { monotonicNow, monotonicOf } from './clock.js';

/** A pending call to `onExpire` at a deadline: a {@link DeadlineTimer} of its own, or one of a deadline's watchers. */
export interface DeadlineWatch {
  /** Stops it; idempotent. */
  cancel(): void;
}

/**
 * Calls `onExpire(subject)` once the deadline has been reached, never before: a timer may fire a
 * millisecond early, and a wait beyond the timer range re-arms. Measured on the monotonic clock
 * (`monotonicAt`, by default `at` converted once, now): re-arming from the wall clock made a
 * 500 ms deadline last 20.5 s after the clock was stepped back by 20 s. Always asynchronous, even for a
 * deadline that has passed, so callers may arm it in the middle of setting up a request. Unref-ed:
 * a pending deadline never keeps the process alive. The subject is passed through rather than
 * captured, so a hot path can use one shared `onExpire` and allocate no closure per call.
 */
export class DeadlineTimer<S = undefined> implements DeadlineWatch {
  readonly #monotonicAt: number;
  readonly #onExpire: (subject: S) => void;
  readonly #subject: S;
  #timer: NodeJS.Timeout | undefined;

  /** @param at - epoch ms; `monotonicAt` - the same instant's monotonic reading, when the caller has it. */
  constructor(at: number, onExpire: (subject: S) => void, subject: S, monotonicAt: number = monotonicOf(at)) {
    this.#monotonicAt = monotonicAt;
    this.#onExpire = onExpire;
    this.#subject = subject;
    this.#timer = setTimeout(DeadlineTimer.#check, Math.min(MAX_TIMER_MS, Math.max(0, monotonicAt - monotonicNow())), this).unref();
  }

  /** Stops the timer; idempotent. */
  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  static #check<S>(timer: DeadlineTimer<S>): void {
    const early = timer.#monotonicAt - monotonicNow();
    if (early > 0) {
      timer.#timer = setTimeout(DeadlineTimer.#check, Math.min(MAX_TIMER_MS, early), timer).unref();
      return;
    }
    timer.#timer = undefined;
    timer.#onExpire(timer.#subject);
  }
}
