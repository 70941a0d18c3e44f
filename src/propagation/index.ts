export { DEADLINE_HEADER, DeadlinePropagator, type DeadlinePropagatorOptions } from './deadline-propagator.js';
