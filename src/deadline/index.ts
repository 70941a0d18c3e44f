export { DeadlineExceededError, isDeadlineExceeded, type DeadlineSource } from './deadline-exceeded-error.js';
export {
  currentDeadline,
  withDeadline,
  withTimeout,
  type Deadline,
  // For lifeline's own folders (ticks run under their deadline); not re-exported by the package.
  DeadlineScope,
  contextWithDeadline,
  deadlineOf,
  runThenSettle,
  MAX_DEADLINE_MS,
} from './deadline.js';
export { ensureContextManager } from './context-manager.js';
