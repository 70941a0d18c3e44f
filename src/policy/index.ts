export {
  DeadlinePolicy,
  type DeadlinePolicyOptions,
  type DeadlineRule,
  type RequestAttributes,
  type RuleValue,
} from './deadline-policy.js';
export { callDeadline, callerDeadline, deadlineHeader, headersBoundAt, type CallDeadline, type CallProgress } from './call-deadline.js';
export { HeaderHosts, type DeadlineHeaderHosts } from './header-hosts.js';
