import type { DeadlineScope } from '../../src/deadline/index.js';
import { currentDeadline, DeadlineExceededError } from '../../src/index.js';

/**
 * How long past its deadline a call may still end and count as cut by it. It bounds a hang, not the
 * precision: far beyond any scheduling delay of a loaded machine, far short of what the stuck peers
 * of these tests would take (forever, or undici's 10 s connect timeout). How exactly the deadline
 * timer fires is tested with fake timers (test/deadline/clock-step.test.ts); how late a real call is
 * released is measured by bench/deadline.
 */
export const CUT_BOUND_MS = 5_000;

/** How a call cut by its deadline ended. */
export interface Cut {
  /** What the call was rejected with. */
  error: unknown;
  /** The deadline in force inside the call, epoch ms: the one the error must name. */
  at: number;
  /** Monotonic ms from that deadline to the rejection; never negative when the cut did not come early. */
  afterDeadlineMs: number;
}

/**
 * Runs `call` inside `under` (e.g. `(fn) => withTimeout(150, fn)`) and waits for its rejection.
 * The deadline is read inside the call, so `afterDeadlineMs` compares the same monotonic instant the
 * deadline timer waits for with the moment the caller saw the error. Fails if the call completes,
 * or is still running {@link CUT_BOUND_MS} after its deadline.
 */
export async function cut(under: (fn: () => Promise<unknown>) => Promise<unknown>, call: () => Promise<unknown>): Promise<Cut> {
  let deadline: DeadlineScope | undefined;
  const ended = under(() => {
    deadline = currentDeadline() as DeadlineScope | undefined;
    return call();
  }).then(
    () => {
      throw new Error('the call completed although its deadline should have cut it');
    },
    (error: unknown) => ({ error, endedAt: performance.now() }),
  );
  if (deadline === undefined) throw new Error('no deadline was in force inside the call');
  const { monotonicAt, at } = deadline;
  const { error, endedAt } = await within(
    monotonicAt + CUT_BOUND_MS - performance.now(),
    `the call was still running ${String(CUT_BOUND_MS)} ms after its deadline`,
    ended,
  );
  return { error, at, afterDeadlineMs: endedAt - monotonicAt };
}

/** `promise`, or a rejection with `message` if it has not settled within `ms`. */
export function within<T>(ms: number, message: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => {
        reject(new Error(message));
      },
      Math.max(0, ms),
    );
  });
  return Promise.race([promise, bound]).finally(() => {
    clearTimeout(timer);
  });
}

/** The `DeadlineExceededError` that ended a call, wherever in the cause chain a client put it. */
export function deadlineErrorOf(error: unknown): DeadlineExceededError | undefined {
  for (let current = error, depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    if (current instanceof DeadlineExceededError) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}
