import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as Undici from 'undici';

/** What lifeline uses of its own undici: all the published package's bundle of it carries. */
export type OwnUndici = Pick<typeof Undici, 'Agent' | 'Dispatcher' | 'FormData' | 'getGlobalDispatcher' | 'setGlobalDispatcher'>;

const requireHere = createRequire(import.meta.url);
/**
 * lifeline's own undici: in the published package, two files beside lifeline's chunks (the parts
 * above and undici's symbols module, which both share: one read, not ~100 modules); run from
 * lifeline's sources, the package. Decided once for both, so that the symbols always come from the
 * copy the Agent does.
 */
const BUNDLED = ((): { parts: string; symbols: string } | undefined => {
  const parts = fileURLToPath(new URL('../_chunks/undici.cjs', import.meta.url));
  const symbols = fileURLToPath(new URL('../_chunks/undici-symbols.cjs', import.meta.url));
  return existsSync(parts) && existsSync(symbols) ? { parts, symbols } : undefined;
})();

/** lifeline's own undici, loaded on first use rather than at import (start-up time). */
export function ownUndici(): OwnUndici {
  return requireHere(BUNDLED?.parts ?? 'undici') as OwnUndici;
}

/**
 * The dispatch option through which lifeline's undici takes a request out of its connect queue: a
 * symbol private to that copy's modules (not `Symbol.for`), so read from the same copy as
 * {@link ownUndici}'s Agent, without loading the rest. Internal to undici, so read defensively.
 */
export function ownQueuedAbortSymbol(): symbol | undefined {
  try {
    const symbols = requireHere(BUNDLED?.symbols ?? 'undici/lib/core/symbols.js') as { kQueuedAbort?: unknown };
    return typeof symbols.kQueuedAbort === 'symbol' ? symbols.kQueuedAbort : undefined;
  } catch {
    return undefined;
  }
}
