export { DeadlinePolicy, type DeadlinePolicyOptions, type DeadlineRule, type RequestAttributes, type RuleValue } from './deadline-policy.js';
export { callDeadline, type CallDeadline } from './call-deadline.js';
