/**
 * What every `install…` function returns: the way back. `using installed = installHttpDeadlines()`
 * uninstalls at the end of the block.
 * @example
 * ```ts
 * const installed = installDriverDeadlines({ defaultTimeoutMs: 10_000 });
 * // …
 * installed.uninstall(); // or: using installed = installDriverDeadlines(…);
 * ```
 */
export interface Installed {
  /**
   * Undoes this install. If it was the one in force, the previous install still in place is in
   * force again, and with the last one gone nothing of it is left. Calls already bounded keep
   * their deadline. Idempotent.
   */
  uninstall(): void;
  /** The same as {@link Installed.uninstall}, for `using`. */
  [Symbol.dispose](): void;
}

/**
 * The installs of one process-wide change (a global dispatcher, a diagnostics channel listener,
 * patched modules) of which the latest is in force, as a context value shadows an outer one: a
 * second install puts its options in force in place of the first's; uninstalling it brings the
 * first's back; uninstalling one that is not in force only takes it out of line. Each family
 * installs through one of these, so installing twice behaves the same everywhere.
 */
export class Installs<Options> {
  readonly #apply: (options: Options) => () => void;
  readonly #line: { readonly options: Options }[] = [];
  #undo: (() => void) | undefined;

  /** @param apply - puts `options` in force and returns what takes them out again. */
  constructor(apply: (options: Options) => () => void) {
    this.#apply = apply;
  }

  /** The options of the install in force, if any. */
  get current(): Options | undefined {
    return this.#line.at(-1)?.options;
  }

  /** How many installs are in place (the latest in force). */
  get size(): number {
    return this.#line.length;
  }

  /** Puts `options` in force in place of the install in force, if any. */
  add(options: Options): Installed {
    const entry = { options };
    // Out first: a family may build on what is in place (the global dispatcher), which must not be ours.
    this.#undo?.();
    this.#undo = undefined;
    try {
      this.#undo = this.#apply(options);
    } catch (error) {
      const current = this.#line.at(-1);
      if (current !== undefined) this.#undo = this.#apply(current.options);
      throw error;
    }
    this.#line.push(entry);
    return installed(() => {
      const index = this.#line.indexOf(entry);
      if (index === -1) return;
      this.#line.splice(index, 1);
      if (index !== this.#line.length) return; // not in force: out of line, nothing to undo
      this.#undo?.();
      this.#undo = undefined;
      const previous = this.#line.at(-1);
      if (previous !== undefined) this.#undo = this.#apply(previous.options);
    });
  }
}

/** An {@link Installed} whose `uninstall` runs `undo` once. */
export function installed(undo: () => void): Installed {
  let done = false;
  const uninstall = (): void => {
    if (done) return;
    done = true;
    undo();
  };
  return { uninstall, [Symbol.dispose]: uninstall };
}
