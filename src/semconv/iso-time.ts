// Year 10000: from here on toISOString changes shape (±YYYYYY), so it formats those itself.
const YEAR_10000 = 253_402_300_800_000;
let lastSecond = Number.NaN;
let lastPrefix = '';

/**
 * `new Date(ms).toISOString()` for span attributes, without its cost (~0.7 µs) on every span:
 * the `YYYY-MM-DDTHH:MM:SS` part is formatted once per second and the milliseconds appended.
 */
export function isoTime(ms: number): string {
  const whole = Math.floor(ms);
  if (!(whole >= 0 && whole < YEAR_10000)) {
    const date = new Date(ms);
    return Number.isNaN(date.getTime()) ? 'invalid' : date.toISOString(); // never throw from a span hook
  }
  const second = Math.floor(whole / 1_000);
  if (second !== lastSecond) {
    lastPrefix = new Date(second * 1_000).toISOString().slice(0, 19);
    lastSecond = second;
  }
  const millis = whole - second * 1_000;
  return `${lastPrefix}.${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
}
