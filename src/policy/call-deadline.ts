import type { Deadline, DeadlineSource } from '../deadline/index.js';
import type { DeadlinePolicy, RequestAttributes } from './deadline-policy.js';

/** The deadline an outgoing call gets, and whether the policy (not the context) set it. */
export interface CallDeadline {
  readonly at: number;
  readonly source: DeadlineSource;
  /** True when a rule or the default gave the call a deadline the context does not carry. */
  readonly fromPolicy: boolean;
}

/**
 * The one rule every client follows (undici, node:http, gRPC): the context's deadline; a matching
 * rule's `now + timeoutMs` when sooner; `defaultTimeoutMs` when nothing else bounds the call.
 * `attributes` is called only when the policy has rules or a default.
 */
export function callDeadline(policy: DeadlinePolicy, current: Deadline | undefined, attributes: () => RequestAttributes): CallDeadline | undefined {
  if (!policy.empty) {
    const budget = policy.ruleTimeout(attributes()) ?? (current === undefined ? policy.defaultTimeoutMs : undefined);
    if (budget !== undefined) {
      const at = Date.now() + budget;
      if (current === undefined || at < current.at) return { at, source: 'policy', fromPolicy: true };
    }
  }
  return current === undefined ? undefined : { at: current.at, source: current.source, fromPolicy: false };
}
