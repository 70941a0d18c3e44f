export { DEADLINE_HEADER } from '../inbound/index.js';
export { DeadlinePropagator, ENVOY_UPSTREAM_TIMEOUT_HEADER, deadlineHeaderValue } from './deadline-propagator.js';
