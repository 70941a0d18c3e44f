let lastMs = Number.NaN;
let lastIso = '';

/**
 * `new Date(ms).toISOString()`, remembering the last answer: every tick of a round and every call
 * under one deadline shares the same instant, and formatting costs about a microsecond.
 */
export function isoTime(ms: number): string {
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastIso;
}
