export {
  DeadlinePolicy,
  type DeadlinePolicyOptions,
  type DeadlineRule,
  type RequestAttributes,
  type RuleValue,
} from './deadline-policy.js';
export {
  armDeadline,
  callDeadline,
  callerDeadline,
  deadlineHeader,
  headersBoundAt,
  noAttributes,
  type CallDeadline,
  type CallProgress,
} from './call-deadline.js';
export { HeaderHosts, type DeadlineHeaderHosts } from './header-hosts.js';
// For lifeline's own folders: the deadline lifecycle node:http and node:http2 calls share.
export { CallBounds, type BoundableCall, type CallFamily } from './call-bounds.js';
