export {
  DEADLINE_HEADER,
  DeadlinePropagator,
  ENVOY_UPSTREAM_TIMEOUT_HEADER,
  deadlineHeaderValue,
  type DeadlinePropagatorOptions,
} from './deadline-propagator.js';
