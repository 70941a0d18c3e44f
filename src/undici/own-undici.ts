import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as Undici from 'undici';

const requireHere = createRequire(import.meta.url);

/**
 * A module of lifeline's own undici: in the published package, a file beside lifeline's chunks (the
 * parts lifeline uses, bundled: one read, not ~100 modules); run from lifeline's sources, the
 * package's own module. Both files of the bundle share its modules, as the package's do.
 */
function ownUndiciModule(bundled: string, packaged: string): unknown {
  const file = new URL(`../_chunks/${bundled}`, import.meta.url);
  return requireHere(existsSync(file) ? fileURLToPath(file) : packaged);
}

/** lifeline's own undici, loaded on first use rather than at import (start-up time). */
export function ownUndici(): typeof Undici {
  return ownUndiciModule('undici.cjs', 'undici') as typeof Undici;
}

/**
 * The dispatch option through which lifeline's undici takes a request out of its connect queue: a
 * symbol private to that copy's modules (not `Symbol.for`), so read from the same copy as
 * {@link ownUndici}'s Agent, without loading the rest. Internal to undici, so read defensively.
 */
export function ownQueuedAbortSymbol(): symbol | undefined {
  try {
    const symbols = ownUndiciModule('undici-symbols.cjs', 'undici/lib/core/symbols.js') as { kQueuedAbort?: unknown };
    return typeof symbols.kQueuedAbort === 'symbol' ? symbols.kQueuedAbort : undefined;
  } catch {
    return undefined;
  }
}
