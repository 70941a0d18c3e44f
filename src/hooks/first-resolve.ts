import { diag } from '@opentelemetry/api';
import * as nodeModule from 'node:module';

type Waiter = (name: string) => void;

/** Names still awaited, each with who waits for it; one resolve hook serves them all. */
const waiting = new Map<string, Set<Waiter>>();
let hooks: { deregister(): void } | undefined;

/**
 * Runs `then(name)` once, the first time anything in the process resolves one of `names` — a
 * package (`pg`; also `pg/lib/client`) or one of Node's modules (`https`; also `node:https`) —
 * from `require` or `import`, before that module loads. For one of Node's modules this process has
 * already loaded it runs at once. So what is needed only beside a module (its instrumentation, a
 * wrap of its exports) costs nothing in a process that never loads it. Returns how to stop waiting.
 * @example
 * ```ts
 * const stop = whenFirstResolved(['https'], () => patchHttps());
 * ```
 */
export function whenFirstResolved(names: readonly string[], then: Waiter): () => void {
  const register = (nodeModule as Partial<typeof nodeModule>).registerHooks;
  const loaded = (process as { moduleLoadList?: readonly string[] }).moduleLoadList; // Node's own record of what it loaded
  let done = false;
  const once: Waiter = (name) => {
    if (done) return;
    stop();
    then(name);
  };
  const stop = (): void => {
    done = true; // a waiter stopped while the hook runs the waiters of the same name does not run
    for (const name of names) {
      const waiters = waiting.get(name);
      waiters?.delete(once);
      if (waiters?.size === 0) waiting.delete(name);
    }
    if (waiting.size === 0) {
      hooks?.deregister();
      hooks = undefined;
    }
  };
  // Without the hook (a Node before 22.15), or with the module already here: now.
  const already = names.find((name) => nodeModule.isBuiltin(name) && loaded?.includes(`NativeModule ${name}`) !== false);
  if (register === undefined || already !== undefined) {
    once(already ?? names[0] ?? '');
    return () => undefined;
  }
  for (const name of names) {
    let waiters = waiting.get(name);
    if (waiters === undefined) waiting.set(name, (waiters = new Set()));
    waiters.add(once);
  }
  hooks ??= register({
    resolve: (specifier, context, nextResolve) => {
      const name = moduleName(specifier);
      const waiters = name === '' ? undefined : waiting.get(name);
      if (waiters !== undefined)
        for (const waiter of [...waiters])
          try {
            waiter(name);
          } catch (err) {
            diag.error(`lifeline: preparing for ${name} failed`, err); // never into the app's own require or import
          }
      return nextResolve(specifier, context);
    },
  });
  return stop;
}

/** `pg` of `pg/lib/client`, `@aws-sdk/x` of `@aws-sdk/x/y`, `https` of `node:https`; `''` for relative, absolute and URL specifiers. */
function moduleName(specifier: string): string {
  if (specifier.startsWith('node:')) return specifier.slice(5);
  const first = specifier.charCodeAt(0);
  if (first === 0x2e /* . */ || first === 0x2f /* / */ || specifier.includes(':')) return '';
  const slash = specifier.indexOf('/');
  if (first !== 0x40 /* @ */) return slash === -1 ? specifier : specifier.slice(0, slash);
  const second = slash === -1 ? -1 : specifier.indexOf('/', slash + 1);
  return second === -1 ? specifier : specifier.slice(0, second);
}
