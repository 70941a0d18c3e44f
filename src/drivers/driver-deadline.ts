import { context, type Context } from '@opentelemetry/api';
import { contextWithDeadline, DeadlineExceededError, DeadlineScope } from '../deadline/index.js';
import { callDeadline, callerDeadline, type CallDeadline, type DeadlinePolicy, type RequestAttributes } from '../policy/index.js';

/**
 * The deadline a driver call made now gets, by the one rule every client follows (the context's, a
 * matching rule's, `defaultTimeoutMs`), or `undefined` for none. The headers bound does not apply:
 * a database answer has no response head to wait for, and a query nothing bounds stays unbounded
 * (its span says `lifeline.deadline.missing`). `attributes` is called only when the policy has rules.
 */
export function driverDeadline(
  policy: DeadlinePolicy,
  attributes: () => RequestAttributes,
  active: Context = context.active(),
): CallDeadline | undefined {
  const deadline = callDeadline(policy, callerDeadline(active), attributes);
  return deadline === undefined || deadline.untilHeaders ? undefined : deadline;
}

/**
 * Runs `call` where the deadline is in the context: for a deadline a policy rule or the default gave,
 * a context that carries it, so that the driver's client span (OpenTelemetry's instrumentation, when
 * it wraps inside lifeline) records it and calls below see it. An instrumentation that wraps outside
 * lifeline started its span before the rule applied, and (pg's, ioredis', mysql2's) does not make it
 * the active one: that span is not told of the rule's deadline (lifeline cannot tell it from the
 * caller's), though the call is bounded by it all the same.
 */
export function runUnderDeadline<T>(deadline: CallDeadline, active: Context, call: () => T): T {
  return applyUnderDeadline(deadline, active, call, undefined, NO_ARGUMENTS);
}

const NO_ARGUMENTS: readonly unknown[] = Object.freeze([]);

/**
 * {@link runUnderDeadline} for a wrapper's `original.apply(thisArg, args)`, with no closure: for the
 * hottest wrappers, where a closure made every call allocate what it captures.
 */
export function applyUnderDeadline<T>(
  deadline: CallDeadline,
  active: Context,
  fn: (...args: never[]) => T,
  thisArg: unknown,
  args: readonly unknown[],
): T {
  if (!deadline.fromPolicy) return Reflect.apply(fn, thisArg, args) as T;
  const scope = new DeadlineScope(deadline.at, deadline.source, deadline.monotonicAt);
  return context.with(contextWithDeadline(active, scope), Reflect.apply, undefined, fn, thisArg, args) as T;
}

/** The error a call the deadline ended gets. */
export function deadlineError(deadline: CallDeadline): DeadlineExceededError {
  return new DeadlineExceededError(deadline.at, deadline.source);
}
