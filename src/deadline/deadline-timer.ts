// setTimeout overflows above 2^31-1 ms and fires at once; longer waits re-arm in steps.
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Calls `onExpire(subject)` once the clock has reached `at`, never before: a timer may fire a
 * millisecond early, and a wait beyond the timer range re-arms. Always asynchronous, even for a
 * deadline that has passed, so callers may arm it in the middle of setting up a request. Unref-ed:
 * a pending deadline never keeps the process alive. The subject is passed through rather than
 * captured, so a hot path can use one shared `onExpire` and allocate no closure per call.
 */
export class DeadlineTimer<S = undefined> {
  readonly #at: number;
  readonly #onExpire: (subject: S) => void;
  readonly #subject: S;
  #timer: NodeJS.Timeout | undefined;

  constructor(at: number, onExpire: (subject: S) => void, subject: S) {
    this.#at = at;
    this.#onExpire = onExpire;
    this.#subject = subject;
    this.#timer = setTimeout(DeadlineTimer.#check, Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now())), this).unref();
  }

  /** Stops the timer; idempotent. */
  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  static #check<S>(timer: DeadlineTimer<S>): void {
    const early = timer.#at - Date.now();
    if (early > 0) {
      timer.#timer = setTimeout(DeadlineTimer.#check, Math.min(MAX_TIMER_MS, early), timer).unref();
      return;
    }
    timer.#timer = undefined;
    timer.#onExpire(timer.#subject);
  }
}
