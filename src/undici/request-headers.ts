import type { Dispatcher } from 'undici';

type Headers = NonNullable<Dispatcher.DispatchOptions['headers']>;

/**
 * A copy of a request's `headers` with each of `names` (`x-request-timeout-ms`, and Envoy's when
 * asked for) set to `value`, in place of any the caller set, in a shape undici accepts: an object stays an object, a flat `[name, value, …]` array and an
 * array of pairs keep their shape, any other iterable of pairs (a `Headers`, a `Map`, a generator)
 * becomes a flat array. The caller's headers are never changed. Headers undici would refuse are
 * returned as they are (an iterable, materialized once), so the caller gets undici's own error.
 */
export function withDeadlineHeader(headers: Headers | null | undefined, value: string, names: readonly string[]): Headers {
  if (headers === undefined || headers === null) {
    const only: Record<string, string> = {};
    for (const name of names) only[name] = value;
    return only;
  }
  if (Array.isArray(headers))
    return Array.isArray(headers[0]) ? withPair(headers as unknown as unknown[][], value, names) : withFlat(headers, value, names);
  if (typeof headers !== 'object') return headers;
  if (iterable(headers)) {
    const entries = [...(headers as Iterable<unknown>)];
    if (!entries.every((entry) => Array.isArray(entry) && entry.length === 2))
      return { [Symbol.iterator]: () => entries[Symbol.iterator]() } as unknown as Headers;
    return withFlat(entries.flat(), value, names);
  }
  const copy: Record<string, unknown> = {};
  for (const name of Object.keys(headers)) {
    if (!isOneOf(name, names)) copy[name] = (headers as Record<string, unknown>)[name];
  }
  for (const name of names) copy[name] = value;
  return copy as Headers;
}

function withFlat(flat: readonly unknown[], value: string, names: readonly string[]): Headers {
  if (flat.length % 2 !== 0) return flat as Headers; // undici says why
  const copy: unknown[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    if (!isOneOf(flat[i], names)) copy.push(flat[i], flat[i + 1]);
  }
  for (const name of names) copy.push(name, value);
  return copy as Headers;
}

function withPair(pairs: readonly unknown[][], value: string, names: readonly string[]): Headers {
  return [...pairs.filter((pair) => !isOneOf(pair[0], names)), ...names.map((name) => [name, value])] as unknown as Headers;
}

/** Whether the header `name` (a string or a Buffer, any case) is one of `names` (lower case). */
function isOneOf(name: unknown, names: readonly string[]): boolean {
  for (const own of names) {
    // Compared by length first: this runs for every header of every call to a listed host.
    if (typeof name === 'string') {
      if (name.length === own.length && name.toLowerCase() === own) return true;
    } else if (Buffer.isBuffer(name) && name.length === own.length && name.toString('latin1').toLowerCase() === own) return true;
  }
  return false;
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
