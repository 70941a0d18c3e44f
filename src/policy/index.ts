export { DeadlinePolicy, type DeadlinePolicyOptions, type DeadlineRule, type RequestAttributes, type RuleValue } from './deadline-policy.js';
export { callDeadline, deadlineHeader, type CallDeadline } from './call-deadline.js';
export { HeaderHosts, type DeadlineHeaderHosts } from './header-hosts.js';
