import { createRequire } from 'node:module';
import type { Dispatcher } from 'undici';
import type * as Undici from 'undici';
import type { DeadlinePolicyOptions } from '../policy/index.js';
import { deadlineInterceptor } from './deadline-interceptor.js';
import { adoptFormData } from './form-data.js';

/** Options of {@link installDeadlineDispatcher}. */
export interface DeadlineDispatcherOptions extends DeadlinePolicyOptions {
  /**
   * The dispatcher to put deadlines on. Default: the process's global dispatcher as it is (Node's
   * own, a `ProxyAgent`, the `EnvHttpProxyAgent` of `NODE_USE_ENV_PROXY=1`, custom TLS…), so its
   * settings survive; an undici `Agent` when there is none yet.
   */
  dispatcher?: Dispatcher;
}

/** The installed global dispatcher, and the way back. */
export interface InstalledDeadlineDispatcher {
  readonly dispatcher: Dispatcher;
  /** Puts the previous global dispatcher back, if ours is still the global one. */
  uninstall(): void;
}

// Every undici copy (Node's bundled one, the app's, lifeline's) keeps the global dispatcher in these
// two well-known slots: `.2` for handlers of the onRequestStart/onResponse* API, `.1` for the
// older API (undici 7 puts one dispatcher in both; undici 8 a wrapper in `.1`).
const SLOT = Symbol.for('undici.globalDispatcher.2');
const LEGACY_SLOT = Symbol.for('undici.globalDispatcher.1');
type Slots = Record<symbol, unknown>;

const requireHere = createRequire(import.meta.url);
/** lifeline's own undici, loaded on first install rather than at import (start-up time). */
function ownUndici(): typeof Undici {
  return requireHere('undici') as typeof Undici;
}

/**
 * Sets the global undici dispatcher — used by Node's `fetch` and by every copy of the `undici`
 * package's `request`, `fetch` and `stream` — to one that aborts every request at its deadline.
 * It is built on the global dispatcher the process already has, so proxy, TLS and connection
 * settings stay as they were, and requests go through the same undici copy as without lifeline.
 * @example
 * ```ts
 * const installed = installDeadlineDispatcher({ defaultTimeoutMs: 10_000 });
 * await withTimeout(2_000, () => fetch('https://api.example.com/items')); // ends by 2 s
 * installed.uninstall();
 * ```
 */
export function installDeadlineDispatcher(options: DeadlineDispatcherOptions = {}): InstalledDeadlineDispatcher {
  const { dispatcher: given, ...policy } = options;
  const interceptor = deadlineInterceptor(policy); // a bad policy throws before any global changes
  const slots = globalThis as unknown as Slots;
  // Loading undici puts an Agent of its own in the slots when there is none yet, as a first fetch would.
  const undici = ownUndici();
  const previous = { current: slots[SLOT], legacy: slots[LEGACY_SLOT] };
  const base = given ?? (previous.current as Dispatcher);
  const dispatcher = compose(base, adoptFormData(base instanceof undici.Dispatcher ? undici.FormData : undefined), interceptor);
  if (previous.legacy === previous.current) {
    // An undici 7 layout (Node's bundled undici): both slots hold the one dispatcher.
    writeSlot(SLOT, dispatcher);
    writeSlot(LEGACY_SLOT, dispatcher);
  } else {
    undici.setGlobalDispatcher(dispatcher);
  }
  return {
    dispatcher,
    uninstall() {
      if (slots[SLOT] !== dispatcher) return; // wrapped or replaced since: still in use
      writeSlot(SLOT, previous.current);
      writeSlot(LEGACY_SLOT, previous.legacy);
    },
  };
}

/**
 * `base` composed with the deadline interceptor, through `base`'s own undici copy, so the request
 * validation (e.g. which `FormData` is accepted), errors and responses are those of that copy.
 */
function compose(base: Dispatcher, ...interceptors: Dispatcher.DispatcherComposeInterceptor[]): Dispatcher {
  if (typeof base.compose === 'function') return base.compose(...interceptors);
  // A hand-written dispatcher with only `dispatch`: compose it as undici would.
  return ownUndici().Dispatcher.prototype.compose.call(base, ...interceptors);
}

function writeSlot(slot: symbol, value: unknown): void {
  Object.defineProperty(globalThis, slot, { value, writable: true, enumerable: false, configurable: false });
}
