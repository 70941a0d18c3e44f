/** `value` without /g or /y: such a RegExp remembers `lastIndex` between tests, and matching a call must not depend on the calls before it. */
export function stateless<T>(value: T): T {
  return value instanceof RegExp && (value.global || value.sticky)
    ? (new RegExp(value.source, value.flags.replace(/[gy]/g, '')) as T)
    : value;
}
