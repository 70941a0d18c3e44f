export { DeadlineExceededError, isDeadlineExceeded, markEndedByDeadline, type DeadlineSource } from './deadline-exceeded-error.js';
export {
  contextWithoutDeadline,
  currentDeadline,
  withDeadline,
  withoutDeadline,
  withTimeout,
  type Deadline,
  type Started,
  // For lifeline's own folders (ticks run under their deadline); not re-exported by the package.
  DeadlineScope,
  contextWithDeadline,
  deadlineOf,
  shrinks,
  runThenSettle,
  MAX_DEADLINE_MS,
} from './deadline.js';
export { ensureContextManager } from './context-manager.js';
// For lifeline's own folders: the one timer every client's deadline uses.
export { DeadlineTimer, type DeadlineWatch } from './deadline-timer.js';
// For lifeline's own folders: the two clocks a deadline is read on.
export { epochOf, monotonicNow, monotonicOf } from './clock.js';
