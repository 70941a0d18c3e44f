export { DeadlinePolicy, type DeadlinePolicyOptions, type DeadlineRule, type RequestAttributes, type RuleValue } from './deadline-policy.js';
