import { context, SpanKind, trace, type Context } from '@opentelemetry/api';
import { contextWithDeadline, DeadlineExceededError, DeadlineScope, DeadlineTimer, type DeadlineWatch } from '../deadline/index.js';
import { callDeadline, callerDeadline, type CallDeadline, type DeadlinePolicy, type RequestAttributes } from '../policy/index.js';
import { recordDeadline } from '../processors/index.js';

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
 * a context that carries it, so that the driver's client span records it and calls below see it.
 * The span is started inside when OpenTelemetry's instrumentation wraps inside lifeline, and is
 * `active`'s when it wraps outside (it patched the driver first): then the deadline is recorded
 * there, as a rule's deadline on a node:http or gRPC call is.
 */
export function runUnderDeadline<T>(deadline: CallDeadline, active: Context, call: () => T): T {
  if (!deadline.fromPolicy) return call();
  const span = trace.getSpan(active) as { kind?: SpanKind; attributes?: Record<string, unknown> } | undefined;
  if (span?.kind === SpanKind.CLIENT && (span.attributes?.['db.system.name'] ?? span.attributes?.['db.system']) !== undefined)
    recordDeadline(span as Parameters<typeof recordDeadline>[0], deadline, true);
  return context.with(contextWithDeadline(active, new DeadlineScope(deadline.at, deadline.source, deadline.monotonicAt)), call);
}

/** The error a call the deadline ended gets. */
export function deadlineError(deadline: CallDeadline): DeadlineExceededError {
  return new DeadlineExceededError(deadline.at, deadline.source);
}

/**
 * `onExpire(subject)` once `deadline` has passed, never before: on the timer of the context's
 * deadline, shared by every call under it, or, for a deadline of the call's own (a rule's, the
 * default), a timer of its own.
 */
export function armDeadline<S>(deadline: CallDeadline, onExpire: (subject: S) => void, subject: S): DeadlineWatch {
  return deadline.scope?.watch(onExpire, subject) ?? new DeadlineTimer(deadline.at, onExpire, subject, deadline.monotonicAt);
}
