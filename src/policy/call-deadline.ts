import { propagation, type Context } from '@opentelemetry/api';
import { isTracingSuppressed } from '@opentelemetry/core';
import {
  DeadlineTimer,
  deadlineOf,
  monotonicNow,
  shrinks,
  type DeadlineScope,
  type DeadlineSource,
  type DeadlineWatch,
} from '../deadline/index.js';
import { DEADLINE_HEADER, deadlineHeaderValue } from '../propagation/index.js';
import type { DeadlinePolicy, RequestAttributes } from './deadline-policy.js';

/** The deadline an outgoing call gets, and whether the policy (not the context) set it. */
export interface CallDeadline {
  /** Epoch ms, for errors and spans. */
  readonly at: number;
  /** The same instant on the monotonic clock: what the call's timer waits for and its header counts down to. */
  readonly monotonicAt: number;
  readonly source: DeadlineSource;
  /** True when a rule, the default or the headers bound gave the call a deadline the context does not carry. */
  readonly fromPolicy: boolean;
  /**
   * True for the headers bound (`source` `headers`): `at` bounds the connect phase (dispatch + the
   * bound), and {@link headersBoundAt} the rest of the wait for the response head; the client clears
   * it when the head arrives, and the callee is not told of it.
   */
  readonly untilHeaders: boolean;
  /** The headers bound, in ms (`untilHeaders` only): how long each bounded phase may take. */
  readonly boundMs?: number;
  /** The context's deadline, when the call has it (not `fromPolicy`): its calls share its one timer ({@link DeadlineScope.watch}). */
  readonly scope?: DeadlineScope;
}

/**
 * How far a call under the headers bound got, as its client reports it: `dispatched` (queued,
 * resolving, connecting, TLS, a proxy tunnel), `connected` (the request is being sent, its body
 * still going out), `sent` (the request went out in full: waiting for the response head).
 */
export type CallProgress = 'dispatched' | 'connected' | 'sent';

/**
 * The headers bound, the one rule every client follows: a connection within the bound, and, once
 * the request has been sent in full, its response head within the bound. Given how far the call
 * got and since when (`since`, ms since the epoch), the instant the bound ends it, or `undefined`
 * while it does not run: sending the request (an upload takes the time it takes, as with undici's
 * own `headersTimeout`, which starts once the request is sent). The client clears the bound when
 * the head arrives, and applies none when the caller set a timeout of its own for the call.
 */
export function headersBoundAt(deadline: CallDeadline, progress: CallProgress, since: number): number | undefined {
  if (progress === 'dispatched') return deadline.at; // dispatched at `since`, bounded from then
  return progress === 'sent' ? since + (deadline.boundMs ?? 0) : undefined;
}

/**
 * The deadline a call made in `ctx` inherits: the context's, except for the OpenTelemetry SDK's own
 * traffic (tracing suppressed, as exporters send). A batch processor's timer runs in the context of
 * the span that armed it, often tick work whose deadline passed long ago: exports inheriting it
 * failed at once, and every span after it was lost. Exporters have a timeout of their own.
 */
export function callerDeadline(ctx: Context): DeadlineScope | undefined {
  return isTracingSuppressed(ctx) ? undefined : deadlineOf(ctx);
}

/**
 * The one rule every client follows (undici, node:http, gRPC): the context's deadline; a matching
 * rule's `now + timeoutMs` when sooner; `defaultTimeoutMs` when nothing else bounds the call; and
 * when not even that, `headersTimeoutMs` on the connection and the wait for the response head
 * ({@link headersBoundAt}). `attributes` is called
 * only when the policy has rules.
 */
export function callDeadline(
  policy: DeadlinePolicy,
  current: DeadlineScope | undefined,
  attributes: () => RequestAttributes,
): CallDeadline | undefined {
  // A headers bound in the context is the one of a call being dispatched, never a deadline of calls below it.
  const context = current?.source === 'headers' ? undefined : current;
  const budget = policy.hasRules ? policy.ruleTimeout(attributes()) : undefined;
  if (budget !== undefined) {
    const monotonicAt = monotonicNow() + budget;
    if (shrinks(context, monotonicAt))
      return { at: Date.now() + budget, monotonicAt, source: 'policy', fromPolicy: true, untilHeaders: false };
  }
  if (context !== undefined)
    return (context.asCall ??= {
      at: context.at,
      monotonicAt: context.monotonicAt,
      source: context.source,
      fromPolicy: false,
      untilHeaders: false,
      scope: context,
    } satisfies CallDeadline) as CallDeadline;
  if (policy.defaultTimeoutMs !== undefined)
    return {
      at: Date.now() + policy.defaultTimeoutMs,
      monotonicAt: monotonicNow() + policy.defaultTimeoutMs,
      source: 'policy',
      fromPolicy: true,
      untilHeaders: false,
    };
  const boundMs = policy.headersTimeoutMs;
  if (boundMs !== undefined)
    return {
      at: Date.now() + boundMs,
      monotonicAt: monotonicNow() + boundMs,
      source: 'headers',
      fromPolicy: true,
      untilHeaders: true,
      boundMs,
    };
  return undefined;
}

/**
 * The `x-request-timeout-ms` value a call with `deadline` carries to `host`, or `undefined` for
 * none: only to the hosts of `deadlineHeaderHosts`, only while lifeline's `DeadlinePropagator` is
 * (part of) the global propagator, and never for the headers bound, which is no deadline of the
 * callee's work. `host` is called only when the answer depends on it.
 */
export function deadlineHeader(policy: DeadlinePolicy, deadline: CallDeadline, host: () => string | undefined): string | undefined {
  const hosts = policy.headerHosts;
  if (deadline.untilHeaders || hosts.fixed === false) return undefined;
  if (hosts.fixed === undefined) {
    const name = host();
    if (name === undefined || !hosts.includes(name)) return undefined;
  }
  return propagation.fields().includes(DEADLINE_HEADER) ? deadlineHeaderValue(deadline.monotonicAt) : undefined;
}

/**
 * `onExpire(subject)` once `deadline` has passed, never before: on the timer of the context's
 * deadline, shared by every call under it (the calls of one request or tick, one after another or
 * at once), or, for a deadline of the call's own (a rule's, the default, the headers bound), a
 * timer of its own. Every client family arms its calls through this (the headers bound, re-armed
 * for the response head once the request is sent, gets a timer of its own there).
 */
export function armDeadline<S>(deadline: CallDeadline, onExpire: (subject: S) => void, subject: S): DeadlineWatch {
  const scope = deadline.scope;
  // A scope made by another copy of lifeline (the context key is shared) may have no `watch`.
  if (scope !== undefined && typeof scope.watch === 'function') return scope.watch(onExpire, subject);
  return new DeadlineTimer(deadline.at, onExpire, subject, deadline.monotonicAt);
}

/** The `attributes` a client passes {@link callDeadline} when its policy has no rules: never called. */
export function noAttributes(): RequestAttributes {
  return {};
}
