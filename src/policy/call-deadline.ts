import { propagation } from '@opentelemetry/api';
import type { Deadline, DeadlineSource } from '../deadline/index.js';
import { DEADLINE_HEADER, deadlineHeaderValue } from '../propagation/index.js';
import type { DeadlinePolicy, RequestAttributes } from './deadline-policy.js';

/** The deadline an outgoing call gets, and whether the policy (not the context) set it. */
export interface CallDeadline {
  readonly at: number;
  readonly source: DeadlineSource;
  /** True when a rule, the default or the headers bound gave the call a deadline the context does not carry. */
  readonly fromPolicy: boolean;
  /**
   * True for the headers bound (`source` `headers`): `at` bounds the wait for the response head
   * only; the client clears it when the head arrives, and the callee is not told of it.
   */
  readonly untilHeaders: boolean;
}

/**
 * The one rule every client follows (undici, node:http, gRPC): the context's deadline; a matching
 * rule's `now + timeoutMs` when sooner; `defaultTimeoutMs` when nothing else bounds the call; and
 * when not even that, `headersTimeoutMs` on the wait for the response head. `attributes` is called
 * only when the policy has rules.
 */
export function callDeadline(policy: DeadlinePolicy, current: Deadline | undefined, attributes: () => RequestAttributes): CallDeadline | undefined {
  // A headers bound in the context is the one of a call being dispatched, never a deadline of calls below it.
  const context = current?.source === 'headers' ? undefined : current;
  const budget = policy.hasRules ? policy.ruleTimeout(attributes()) : undefined;
  if (budget !== undefined) {
    const at = Date.now() + budget;
    if (context === undefined || at < context.at) return { at, source: 'policy', fromPolicy: true, untilHeaders: false };
  }
  if (context !== undefined) return { at: context.at, source: context.source, fromPolicy: false, untilHeaders: false };
  if (policy.defaultTimeoutMs !== undefined) return { at: Date.now() + policy.defaultTimeoutMs, source: 'policy', fromPolicy: true, untilHeaders: false };
  if (policy.headersTimeoutMs !== undefined) return { at: Date.now() + policy.headersTimeoutMs, source: 'headers', fromPolicy: true, untilHeaders: true };
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
  return propagation.fields().includes(DEADLINE_HEADER) ? deadlineHeaderValue(deadline.at) : undefined;
}
