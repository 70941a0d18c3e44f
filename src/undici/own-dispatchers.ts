import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Dispatcher } from 'undici';
import { patchModuleFiles, wrapMethod, type PatchedModules } from '../hooks/index.js';
import { DeadlinePolicy, type DeadlinePolicyOptions } from '../policy/index.js';
import { DEADLINE_DECIDED, deadlineDispatch } from './deadline-interceptor.js';

/** Options of {@link installDispatcherDeadlines}. */
export interface DispatcherDeadlinesOptions extends DeadlinePolicyOptions {
  /**
   * The names under which copies of undici are installed (default `['undici']`, which is every
   * copy, nested ones too: `node_modules/@fastify/reply-from/node_modules/undici`). An npm alias
   * (`"undici7": "npm:undici@7"`) installs a copy under another directory name, and module hooks
   * know a package by that name only: list it here.
   */
  packages?: readonly string[];
}

/** The installed dispatcher deadlines, and the way back. */
export interface InstalledDispatcherDeadlines {
  /** Puts every undici copy's `dispatch` back as it was; idempotent. */
  uninstall(): void;
}

type DispatchMethod = (this: Dispatcher, opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) => boolean;

/** What a copy of undici offers the deadline: its queued-abort symbol and (undici 7) its handler adapter. */
interface UndiciCopy {
  readonly queuedAbort: symbol | undefined;
  readonly adapt: ((handler: Dispatcher.DispatchHandler) => Dispatcher.DispatchHandler) | undefined;
}

let patched: PatchedModules | undefined;

/**
 * Puts the deadline interceptor's rule on every dispatcher the app or a library makes itself —
 * `Client`, `Pool`, `BalancedPool`, `Agent`, `ProxyAgent`, `RetryAgent`, `EnvHttpProxyAgent` of
 * every undici copy (7 and 8; loaded before or after lifeline; from `require` or `import`): a
 * request ends at its deadline whether it waits in the pool's queue, connects, waits for headers or
 * streams its body. It patches `DispatcherBase#dispatch`, through which every one of them passes:
 * the outermost dispatcher a request reaches decides its deadline (in the caller's context) and
 * marks it, so an Agent's Pool and Client, and the global dispatcher of `installDeadlineDispatcher`
 * (whose interceptor marks it too) bound it once. Dispatchers composed (`.compose()`) before this
 * was installed keep the `dispatch` they were composed on.
 * @example
 * ```ts
 * installDispatcherDeadlines({ defaultTimeoutMs: 10_000 });
 * const pool = new Pool('http://inventory:8080');
 * await withTimeout(2_000, () => pool.request({ path: '/items', method: 'GET' })); // ends by 2 s
 * ```
 */
export function installDispatcherDeadlines(options: DispatcherDeadlinesOptions = {}): InstalledDispatcherDeadlines {
  const { packages = ['undici'], ...policy } = options;
  new DeadlinePolicy(policy); // a bad policy throws before anything is patched
  patched?.uninstall();
  const modules = patchModuleFiles(
    packages.map((module) => ({
      module,
      file: 'lib/dispatcher/dispatcher-base.js',
      patch(exports: unknown, packageDir: string) {
        const prototype = (exports as { prototype?: object } | undefined)?.prototype;
        if (prototype === undefined) return undefined;
        const copy = undiciCopy(packageDir);
        const withDeadline = deadlineDispatch(policy, copy.queuedAbort, copy.adapt);
        return wrapMethod<DispatchMethod>(
          prototype,
          'dispatch',
          'lifeline.undici',
          (original) =>
            function dispatch(this: Dispatcher, opts, handler) {
              // Below the dispatcher that decided (an Agent's Pool, its Client): straight through.
              if ((opts as { [DEADLINE_DECIDED]?: unknown } | null | undefined)?.[DEADLINE_DECIDED] === true)
                return original.call(this, opts, handler);
              return withDeadline((o, h) => original.call(this, o, h), opts, handler);
            },
        );
      },
    })),
  );
  patched = modules;
  return {
    uninstall() {
      if (patched !== modules) return;
      patched = undefined;
      modules.uninstall();
    },
  };
}

/** Reads a copy's internals defensively: a copy without them still gets deadlines, with less. */
function undiciCopy(packageDir: string): UndiciCopy {
  const requireCopy = createRequire(join(packageDir, 'package.json'));
  let queuedAbort: symbol | undefined;
  try {
    const symbols = requireCopy('./lib/core/symbols.js') as { kQueuedAbort?: unknown };
    if (typeof symbols.kQueuedAbort === 'symbol') queuedAbort = symbols.kQueuedAbort;
  } catch {
    queuedAbort = undefined;
  }
  let adapt: UndiciCopy['adapt'];
  try {
    // undici 7: its own API hands dispatchers handlers of the older API (onConnect, onHeaders…);
    // its WrapHandler presents one as a current handler, which the deadline handler wraps.
    const WrapHandler = requireCopy('./lib/handler/wrap-handler.js') as { wrap?: unknown };
    if (typeof WrapHandler.wrap === 'function') {
      const wrap = WrapHandler.wrap as (handler: Dispatcher.DispatchHandler) => Dispatcher.DispatchHandler;
      adapt = (handler) => wrap.call(WrapHandler, handler);
    }
  } catch {
    adapt = undefined; // undici 8: every handler is of the current API
  }
  return { queuedAbort, adapt };
}
