import { Agent, getGlobalDispatcher, setGlobalDispatcher, type Dispatcher } from 'undici';
import type { DeadlinePolicyOptions } from '../policy/index.js';
import { deadlineInterceptor } from './deadline-interceptor.js';

/** Options of {@link installDeadlineDispatcher}. */
export interface DeadlineDispatcherOptions extends DeadlinePolicyOptions {
  /** The dispatcher to put deadlines on. Default: a new undici `Agent`. */
  dispatcher?: Dispatcher;
}

/** The installed global dispatcher, and the way back. */
export interface InstalledDeadlineDispatcher {
  readonly dispatcher: Dispatcher;
  /** Puts the previous global dispatcher back (and closes the agent made for it), if ours is still the global one. */
  uninstall(): void;
}

/**
 * Sets the global undici dispatcher — used by Node's `fetch` and by the `undici` package's `request`,
 * `fetch` and `stream` — to one that aborts every request at its deadline (SPEC §6).
 */
export function installDeadlineDispatcher(options: DeadlineDispatcherOptions = {}): InstalledDeadlineDispatcher {
  const { dispatcher: given, ...policy } = options;
  const base = given ?? new Agent();
  const dispatcher = base.compose(deadlineInterceptor(policy));
  const previous = getGlobalDispatcher();
  setGlobalDispatcher(dispatcher);
  return {
    dispatcher,
    uninstall() {
      if (getGlobalDispatcher() !== dispatcher) return; // wrapped or replaced since: still in use
      setGlobalDispatcher(previous);
      // An agent we made is ours to close (gracefully: calls in flight finish); a given one is not.
      if (given === undefined) void base.close();
    },
  };
}
