import type { Dispatcher } from 'undici';
import { LifelineError } from '../errors/index.js';
import { Installs, type Installed } from '../install/index.js';
import type { DeadlinePolicyOptions } from '../policy/index.js';
import { deadlineInterceptor } from './deadline-interceptor.js';
import { adoptFormData } from './form-data.js';
import { ownUndici } from './own-undici.js';

/** Options of {@link installDeadlineDispatcher}. */
export interface DeadlineDispatcherOptions extends DeadlinePolicyOptions {
  /**
   * The dispatcher to put deadlines on. Default: the process's global dispatcher as it is (Node's
   * own, a `ProxyAgent`, the `EnvHttpProxyAgent` of `NODE_USE_ENV_PROXY=1`, custom TLS…), so its
   * settings survive; an undici `Agent` when there is none yet.
   */
  dispatcher?: Dispatcher;
}

/**
 * The installed global dispatcher, and the way back: `uninstall` puts the previous global
 * dispatcher back, if this install's is still the global one (an app that wrapped it since keeps
 * its wrapper).
 */
export interface InstalledDeadlineDispatcher extends Installed {
  /**
   * The global dispatcher with deadlines (the one this install last put in force). Installed where
   * there was none (or Node's stock one), it is built on the first request; reading this builds it
   * too. After an `uninstall` that came before any request, reading it throws `ERR_CLOSED`.
   */
  readonly dispatcher: Dispatcher;
}

/** One install: what it builds on and with, and the dispatcher it last put in force. */
interface DispatcherInstall {
  readonly given: Dispatcher | undefined;
  readonly interceptor: Dispatcher.DispatcherComposeInterceptor;
  last?: ActiveDispatcher;
  /** The Agent lifeline made for it, kept across swaps (built on again) and closed at its uninstall. */
  agent?: Dispatcher | undefined;
  /** Its dispatcher was wrapped by someone else while in force: never closed under them. */
  wrapped?: boolean;
}

/** A dispatcher with deadlines in the global slots, and how to take it out. */
interface ActiveDispatcher {
  readonly dispatcher: Dispatcher;
  /** The Agent made to build it on, if one was. */
  readonly made: Dispatcher | undefined;
  /** Puts the previous global dispatcher back, if this one is still the global one: whether it was. */
  uninstall(): boolean;
}

// Every undici copy (Node's bundled one, the app's, lifeline's) keeps the global dispatcher in these
// two well-known slots: `.2` for handlers of the onRequestStart/onResponse* API, `.1` for the
// older API (undici 7 puts one dispatcher in both; undici 8 a wrapper in `.1`).
const SLOT = Symbol.for('undici.globalDispatcher.2');
const LEGACY_SLOT = Symbol.for('undici.globalDispatcher.1');
type Slots = Record<symbol, unknown>;

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
  const { dispatcher, ...policy } = options;
  const interceptor = deadlineInterceptor(policy); // a bad policy throws before any global changes
  // A later install without a dispatcher of its own builds on the one the install it replaces was
  // given (an app's ProxyAgent, say), as it would have built on that install's global dispatcher.
  const install: DispatcherInstall = { given: dispatcher ?? installs.current?.given, interceptor };
  const handle = installs.add(install);
  const uninstall = (): void => {
    handle.uninstall();
    // An agent we made is ours to close (gracefully: calls in flight finish); any other is not.
    if (install.wrapped !== true) void install.agent?.close();
    install.agent = undefined;
  };
  return {
    get dispatcher() {
      return (install.last as ActiveDispatcher).dispatcher; // set by the add above
    },
    uninstall,
    [Symbol.dispose]: uninstall,
  };
}

// Installing again takes the install in force out (its dispatcher leaves the global slots) and
// builds on what the slots then hold, so two installs never stack their interceptors.
const installs = new Installs<DispatcherInstall>((install) => {
  const active = activate(install.given, install.interceptor, install.agent);
  install.last = active;
  return () => {
    if (active.uninstall()) install.agent ??= active.made;
    else install.wrapped = true;
  };
});

function activate(
  given: Dispatcher | undefined,
  interceptor: Dispatcher.DispatcherComposeInterceptor,
  agent: Dispatcher | undefined,
): ActiveDispatcher {
  const slots = globalThis as unknown as Slots;
  const previous = { current: slots[SLOT], legacy: slots[LEGACY_SLOT] };
  const replaceable =
    previous.current === undefined
      ? previous.legacy === undefined
      : typeof previous.current === 'object' && previous.current !== null && isStockAgent(previous.current);
  return given === undefined && replaceable ? installOnFirstDispatch(interceptor, previous, agent) : installNow(given, interceptor, agent);
}

/** `agent`: an Agent lifeline made for the same install before, to build on again rather than make another. */
function installNow(
  given: Dispatcher | undefined,
  interceptor: Dispatcher.DispatcherComposeInterceptor,
  agent?: Dispatcher,
): ActiveDispatcher {
  const slots = globalThis as unknown as Slots;
  // Loading undici puts an Agent of its own in the slots when there is none yet, as a first fetch would.
  const undici = ownUndici();
  const previous = { current: slots[SLOT], legacy: slots[LEGACY_SLOT] };
  let made: Dispatcher | undefined;
  // Slots emptied by a stand-in below while this undici copy was already loaded: nothing to build on.
  let base = given ?? (previous.current as Dispatcher | undefined) ?? (made = agent ?? new undici.Agent());
  if (given === undefined && !(base instanceof undici.Dispatcher) && isStockAgent(base)) {
    // An Agent with nothing configured, typically Node's own (undici 7, bundled): an Agent of
    // lifeline's undici 8 is the same, and it can take a request out of its connect queue at the
    // deadline, which undici 7 cannot (there the caller is freed, but the connect goes on).
    base = made = agent ?? new undici.Agent();
  }
  const dispatcher = compose(base, adoptFormData(base instanceof undici.Dispatcher ? undici.FormData : undefined), interceptor);
  if (base === previous.current && previous.legacy === previous.current) {
    // Built on an undici 7 dispatcher (Node's bundled one, say): like undici 7, put it in both slots.
    writeSlot(SLOT, dispatcher);
    writeSlot(LEGACY_SLOT, dispatcher);
  } else {
    // undici 8 layout: `.1` holds a wrapper that turns older handlers (Node's fetch's) into current ones.
    undici.setGlobalDispatcher(dispatcher);
  }
  return {
    dispatcher,
    made,
    uninstall() {
      if (slots[SLOT] !== dispatcher) return false; // wrapped or replaced since: still in use
      writeSlot(SLOT, previous.current);
      writeSlot(LEGACY_SLOT, previous.legacy);
      return true;
    },
  };
}

/**
 * No dispatcher yet, or Node's stock one, which would be replaced anyway (the usual cases at
 * start-up): stand-ins take both slots, and the first request through either builds the real one
 * from what the slots held. Loading lifeline's undici costs ~65–90 ms and ~25 MB, which a service
 * that makes no undici call never pays. Requests already in flight keep the dispatcher they had.
 */
function installOnFirstDispatch(
  interceptor: Dispatcher.DispatcherComposeInterceptor,
  previous: { current: unknown; legacy: unknown },
  agent: Dispatcher | undefined,
): ActiveDispatcher {
  const slots = globalThis as unknown as Slots;
  let installed: ActiveDispatcher | undefined;
  let removed = false;
  const real = (): ActiveDispatcher => {
    if (installed === undefined) {
      writeSlot(SLOT, previous.current);
      writeSlot(LEGACY_SLOT, previous.legacy);
      installed = installNow(undefined, interceptor, agent);
    }
    return installed;
  };
  // Each stand-in passes its first request on to whatever its own slot holds once built: the `.1`
  // one gets handlers of the older API, and in undici 8's layout `.1` holds the wrapper for them.
  // Anything else asked of a stand-in (`compose`, `on`, `instanceof`…) builds the real dispatcher
  // and is answered by it, so code that reads the global dispatcher at start-up sees a real one.
  const standIn = (slot: symbol): Dispatcher => {
    // Taken out before its first request (uninstalled, or replaced by a later install), a stand-in
    // someone kept hands its calls to whatever is global now: building its own would put it back.
    const builtInSlot = (): object => {
      if (!removed) real();
      return (slots[slot] as object | undefined) ?? ownUndici().getGlobalDispatcher();
    };
    const dispatch = (opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean =>
      (builtInSlot() as Dispatcher).dispatch(opts, handler);
    const stand = new Proxy<object>(
      {},
      {
        get(_target, property) {
          if (property === 'dispatch') return dispatch;
          // Nothing built yet means nothing to close.
          if ((property === 'close' || property === 'destroy') && installed === undefined) return () => Promise.resolve();
          const target = builtInSlot();
          const value: unknown = Reflect.get(target, property);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
        has: (_target, property) => property === 'dispatch' || Reflect.has(builtInSlot(), property),
        getPrototypeOf: () => Object.getPrototypeOf(builtInSlot()) as object | null,
      },
    );
    return stand as Dispatcher;
  };
  const current = standIn(SLOT);
  writeSlot(SLOT, current);
  writeSlot(LEGACY_SLOT, standIn(LEGACY_SLOT));
  return {
    get dispatcher() {
      if (removed)
        throw new LifelineError(
          'ERR_CLOSED',
          'the deadline dispatcher was taken out (uninstalled, or replaced by a later install) before its first request',
        );
      return real().dispatcher;
    },
    get made() {
      return installed?.made;
    },
    uninstall() {
      if (installed !== undefined) return installed.uninstall();
      if (slots[SLOT] !== current) return false; // replaced since: leave it
      removed = true;
      writeSlot(SLOT, previous.current);
      writeSlot(LEGACY_SLOT, previous.legacy);
      return true;
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

/**
 * Whether `dispatcher` is an undici `Agent` (of any copy) made with no options at all, so that an
 * Agent of another copy behaves the same. Read from undici's internals defensively: anything
 * unexpected counts as configured, and configured dispatchers are built upon, never replaced.
 */
function isStockAgent(dispatcher: object | undefined): boolean {
  if (dispatcher?.constructor.name !== 'Agent') return false;
  // A composed Agent is a Proxy whose `dispatch` runs interceptors: configured, never replaced.
  if ((dispatcher as { dispatch?: unknown }).dispatch !== (Object.getPrototypeOf(dispatcher) as { dispatch?: unknown } | null)?.dispatch)
    return false;
  const options = internalField(dispatcher, 'options');
  const factory = internalField(dispatcher, 'factory');
  if (typeof factory !== 'function' || factory.name !== 'defaultFactory') return false;
  if (options === null || typeof options !== 'object') return false;
  return Object.entries(options).every(
    ([key, value]) => value === undefined || (key === 'maxOrigins' && (value === null || value === Infinity)),
  );
}

/** The value under the symbol-keyed field undici names `description`, if there is one. */
function internalField(object: object, description: string): unknown {
  const key = Object.getOwnPropertySymbols(object).find((symbol) => symbol.description === description);
  return key === undefined ? undefined : (object as Record<symbol, unknown>)[key];
}

function writeSlot(slot: symbol, value: unknown): void {
  Object.defineProperty(globalThis, slot, { value, writable: true, enumerable: false, configurable: false });
}
