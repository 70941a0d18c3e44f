// setTimeout overflows above 2^31-1 ms and fires at once; longer waits re-arm in steps.
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Calls `onExpire` once the clock has reached `at`, never before: a timer may fire a millisecond
 * early, and a wait beyond the timer range re-arms. Always asynchronous, even for a deadline that
 * has passed, so callers may arm it in the middle of setting up a request. Unref-ed: a pending
 * deadline never keeps the process alive.
 */
export class DeadlineTimer {
  readonly #at: number;
  readonly #onExpire: () => void;
  #timer: NodeJS.Timeout | undefined;

  constructor(at: number, onExpire: () => void) {
    this.#at = at;
    this.#onExpire = onExpire;
    this.#timer = setTimeout(this.#check, Math.min(MAX_TIMER_MS, Math.max(0, at - Date.now()))).unref();
  }

  /** Stops the timer; idempotent. */
  cancel(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  readonly #check = (): void => {
    const early = this.#at - Date.now();
    if (early > 0) {
      this.#timer = setTimeout(this.#check, Math.min(MAX_TIMER_MS, early)).unref();
      return;
    }
    this.#timer = undefined;
    this.#onExpire();
  };
}
