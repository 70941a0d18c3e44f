import type { Dispatcher } from 'undici';
import { DEADLINE_HEADER } from '../propagation/index.js';

type Headers = NonNullable<Dispatcher.DispatchOptions['headers']>;

/**
 * A copy of a request's `headers` with `x-request-timeout-ms: value` in place of any the caller
 * set, in a shape undici accepts: an object stays an object, a flat `[name, value, …]` array and an
 * array of pairs keep their shape, any other iterable of pairs (a `Headers`, a `Map`, a generator)
 * becomes a flat array. The caller's headers are never changed. Headers undici would refuse are
 * returned as they are (an iterable, materialized once), so the caller gets undici's own error.
 */
export function withDeadlineHeader(headers: Headers | null | undefined, value: string): Headers {
  if (headers === undefined || headers === null) return { [DEADLINE_HEADER]: value };
  if (Array.isArray(headers))
    return Array.isArray(headers[0]) ? withPair(headers as unknown as unknown[][], value) : withFlat(headers, value);
  if (typeof headers !== 'object') return headers;
  if (iterable(headers)) {
    const entries = [...(headers as Iterable<unknown>)];
    if (!entries.every((entry) => Array.isArray(entry) && entry.length === 2))
      return { [Symbol.iterator]: () => entries[Symbol.iterator]() } as unknown as Headers;
    return withFlat(entries.flat(), value);
  }
  const copy: Record<string, unknown> = {};
  for (const name of Object.keys(headers)) {
    if (!isDeadlineHeader(name)) copy[name] = (headers as Record<string, unknown>)[name];
  }
  copy[DEADLINE_HEADER] = value;
  return copy as Headers;
}

function withFlat(flat: readonly unknown[], value: string): Headers {
  if (flat.length % 2 !== 0) return flat as Headers; // undici says why
  const copy: unknown[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    if (!isDeadlineHeader(flat[i])) copy.push(flat[i], flat[i + 1]);
  }
  copy.push(DEADLINE_HEADER, value);
  return copy as Headers;
}

function withPair(pairs: readonly unknown[][], value: string): Headers {
  return [...pairs.filter((pair) => !isDeadlineHeader(pair[0])), [DEADLINE_HEADER, value]] as unknown as Headers;
}

function isDeadlineHeader(name: unknown): boolean {
  // Compared by length first: this runs for every header of every call to a listed host.
  if (typeof name === 'string') return name.length === DEADLINE_HEADER.length && name.toLowerCase() === DEADLINE_HEADER;
  return Buffer.isBuffer(name) && name.length === DEADLINE_HEADER.length && name.toString('latin1').toLowerCase() === DEADLINE_HEADER;
}

/** As undici tells an iterable of pairs from a plain object: its own iterator, or one a class gives it. */
function iterable(headers: object): boolean {
  if (Object.hasOwn(headers, Symbol.iterator)) return true;
  const prototype: unknown = Object.getPrototypeOf(headers);
  return (
    prototype !== null &&
    prototype !== Object.prototype &&
    typeof (headers as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function'
  );
}
