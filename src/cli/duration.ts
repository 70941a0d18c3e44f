import { MAX_TIMER_MS } from '../errors/index.js';

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/**
 * Parses a duration like `20s`, `500ms`, `1.5m` or `2h` into ms (a bare number means seconds, as
 * the seed's `--timeout` did). Returns `undefined` for anything else, zero or negative included.
 */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (match === null) return undefined;
  // Whole ms, within what a timer can wait (AbortSignal.timeout takes a 32-bit count).
  const ms = Math.ceil(Number(match[1]) * (UNITS[match[2] ?? 's'] ?? 1_000));
  return ms > 0 && ms <= MAX_TIMER_MS ? ms : undefined;
}
