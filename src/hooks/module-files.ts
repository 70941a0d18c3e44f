import { createRequire } from 'node:module';
import { join, relative, sep } from 'node:path';
import { Hook } from 'require-in-the-middle';

/** A change to one file of a package, made to every copy of it the process loads. */
export interface ModuleFilePatch {
  /** The package, e.g. `pg` or `@redis/client`. */
  readonly module: string;
  /** The file inside the package, with `/`, e.g. `lib/client.js`. */
  readonly file: string;
  /**
   * Changes the file's exports in place (wrapping prototype methods with {@link wrapMethod}) and
   * returns how to undo it. Called once per copy, with the directory of that copy's package (to
   * reach its other files, e.g. internal symbols); a copy it does not recognise it leaves alone
   * (returns `undefined`).
   */
  patch(exports: unknown, packageDir: string): (() => void) | undefined;
}

/** The installed patches, and the way back. */
export interface PatchedModules {
  /** Undoes every patch and stops patching copies loaded later. Idempotent. */
  uninstall(): void;
}

const requireHere = createRequire(import.meta.url);

/**
 * Applies `patches` to every copy of their files already loaded (found in the CommonJS module
 * cache: an app that imported its driver before lifeline started) and to every copy loaded later,
 * from `require` or from an ES module importing the package (the drivers are CommonJS: their own
 * files are always loaded through `require`, which is where the hook sees them). No ESM loader
 * hook is needed, and modules nobody patches are not touched.
 */
export function patchModuleFiles(patches: readonly ModuleFilePatch[]): PatchedModules {
  const undo: (() => void)[] = [];
  const done = new WeakSet<object>();
  const apply = (patch: ModuleFilePatch, exports: unknown, packageDir: string): void => {
    if ((typeof exports !== 'object' && typeof exports !== 'function') || exports === null || done.has(exports)) return;
    done.add(exports);
    const restore = patch.patch(exports, packageDir);
    if (restore !== undefined) undo.push(restore);
  };
  const cache = requireHere.cache;
  for (const patch of patches) {
    const file = `${sep}${patch.file.split('/').join(sep)}`;
    const suffix = `${sep}node_modules${sep}${patch.module.split('/').join(sep)}${file}`;
    for (const filename of Object.keys(cache)) {
      const loaded = cache[filename];
      if (filename.endsWith(suffix) && loaded?.loaded === true) apply(patch, loaded.exports, filename.slice(0, -file.length));
    }
  }
  const byName = new Map(patches.map((patch) => [`${patch.module}/${patch.file}`, patch]));
  const hook = new Hook([...new Set(patches.map((patch) => patch.module))], { internals: true }, (exports, name, basedir) => {
    if (basedir === undefined) return exports;
    // A package's main file is reported by the package's name alone (`pg-pool`, not `pg-pool/index.js`).
    const patch = byName.get(name.split(sep).join('/')) ?? (byName.has(name) ? undefined : byName.get(`${name}/${mainFile(basedir)}`));
    if (patch !== undefined) apply(patch, exports, basedir);
    return exports;
  });
  let installed = true;
  return {
    uninstall() {
      if (!installed) return;
      installed = false;
      hook.unhook();
      for (const restore of undo.splice(0).reverse()) restore();
    },
  };
}

/** The package's main file, relative to its directory, with `/`; '' when it cannot be resolved. */
function mainFile(packageDir: string): string {
  try {
    return relative(packageDir, createRequire(join(packageDir, 'package.json')).resolve(packageDir))
      .split(sep)
      .join('/');
  } catch {
    return '';
  }
}

/** Marks lifeline's wrappers, so that a second install (another lifeline copy too) wraps no wrapper of its own kind. */
const WRAPPED = Symbol.for('lifeline.wrapped');

/**
 * Replaces `target[name]` with `wrap(original)` and returns how to put the original back (only
 * while nobody has wrapped it again since: their wrapper keeps calling ours, which then passes
 * straight through). `kind` names the wrapper: a method already wrapped by one of that kind is left
 * as it is, and `undefined` is returned.
 *
 * A method wrapped by shimmer (OpenTelemetry's instrumentations) gets a wrapper that keeps
 * shimmer's marks: some instrumentations patch one method twice and count on the marks to replace
 * their first wrapper instead of wrapping it again (`pg`: `lib/client.js`, then the package's
 * `Client`, the same prototype). Between the two, ours would have hidden theirs, and every query
 * recorded two client spans. With the marks, their unwrap takes their wrapper out from under ours
 * and their wrap goes around ours: one of each.
 */
export function wrapMethod<F extends (...args: never[]) => unknown>(
  target: object,
  name: string,
  kind: string,
  wrap: (original: F) => F,
): (() => void) | undefined {
  const holder = target as Record<string, unknown>;
  const original = holder[name];
  if (typeof original !== 'function') return undefined;
  if ((original as { [WRAPPED]?: string })[WRAPPED] === kind) return undefined;
  /** What the undo puts back, and our wrapper around it (both change when a shimmer wrapper under ours is taken out). */
  let inner = original as F;
  const around = (fn: F): F => {
    const wrapper = wrap(fn);
    Object.defineProperty(wrapper, WRAPPED, { value: kind });
    Object.defineProperty(wrapper, 'name', { value: fn.name });
    const shimmed = fn as Partial<Shimmed<F>>;
    if (isShimmed(shimmed)) {
      mark(wrapper, '__original', fn);
      mark(wrapper, '__wrapped', true);
      mark(wrapper, '__unwrap', () => {
        if (holder[name] !== wrapper) return;
        // Their own unwrap takes their wrapper out (a wrapper of another lifeline copy under it stays, rebuilt by its own).
        holder[name] = shimmed;
        shimmed.__unwrap();
        inner = holder[name] as F;
        current = around(inner);
        holder[name] = current;
      });
    }
    return wrapper;
  };
  let current = around(inner);
  holder[name] = current;
  let active = true;
  return () => {
    if (!active) return;
    active = false;
    if (holder[name] === current) holder[name] = inner;
  };
}

/** The marks shimmer puts on a wrapper (OpenTelemetry's `isWrapped` reads them). */
interface Shimmed<F> {
  __original: F;
  __unwrap: () => void;
  __wrapped: true;
}

function isShimmed<F>(fn: Partial<Shimmed<F>>): fn is Shimmed<F> {
  return fn.__wrapped === true && typeof fn.__original === 'function' && typeof fn.__unwrap === 'function';
}

/** As shimmer defines its marks: configurable and writable, so that a later wrap may set them again. */
function mark(wrapper: object, key: keyof Shimmed<unknown>, value: unknown): void {
  Object.defineProperty(wrapper, key, { configurable: true, enumerable: false, writable: true, value });
}

/**
 * {@link wrapMethod} for several methods of `target` at once: `wrappers` maps a method's name to its
 * wrapper. Returns how to undo them all, or `undefined` when `target` is.
 */
export function wrapMethods(
  target: object | undefined,
  kind: string,
  wrappers: Readonly<Record<string, (original: never) => unknown>>,
): (() => void) | undefined {
  if (target === undefined) return undefined;
  const undo = Object.entries(wrappers).map(([name, wrap]) =>
    wrapMethod(target, name, kind, wrap as (original: (...args: never[]) => unknown) => (...args: never[]) => unknown),
  );
  return () => {
    for (const restore of undo) restore?.();
  };
}
