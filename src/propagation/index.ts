export { DEADLINE_HEADER, DeadlinePropagator, deadlineHeaderValue, type DeadlinePropagatorOptions } from './deadline-propagator.js';
