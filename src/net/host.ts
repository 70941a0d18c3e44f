import { isIPv6 } from 'node:net';

/**
 * The one bracket rule: brackets enclose an IPv6 literal and nothing else (as in a URL,
 * `http://[::1]:5555/`), and an IPv6 literal followed by a port must be in them.
 */

/** `[::1]` as `::1`; anything else (an unbalanced bracket, brackets around a name or IPv4) as it is. */
export function unbracketed(host: string): string {
  if (!host.startsWith('[') || !host.endsWith(']')) return host;
  const inner = host.slice(1, -1);
  return isIPv6(inner) ? inner : host;
}

/** `::1` as `[::1]`, to be followed by a port or put in a URL; a name or an IPv4 address as it is. */
export function bracketed(host: string): string {
  return isIPv6(host) ? `[${host}]` : host;
}

/**
 * A `Host` header or URL authority split into its host (an IPv6 literal without its brackets) and
 * port digits: `localhost`, `localhost:80`, `[::1]`, `[::1]:5555`. `undefined` when it is neither:
 * an empty host or port, a port of more than 5 digits, an unbracketed IPv6 literal, text after `]`.
 */
export function splitHostPort(authority: string): { readonly host: string; readonly port: string | undefined } | undefined {
  const match = /^(\[[^\]]*\]|[^[\]:]+)(?::(\d{1,5}))?$/.exec(authority);
  if (match?.[1] === undefined) return undefined;
  const host = unbracketed(match[1]);
  return host.startsWith('[') ? undefined : { host, port: match[2] };
}

const HOST_NAME = /^\.?[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/;

/** `host` as rules compare it: lower case, an IPv6 literal without brackets, without the trailing dot of a fully qualified name. */
export function comparableHost(host: string): string {
  const name = unbracketed(host.toLowerCase());
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/**
 * `entry` as a rule naming hosts holds it ({@link comparableHost}), or `undefined` when it is not
 * one: a host name (`api.example.com`, `redis`, `api.example.com.`), a `.suffix` of names
 * (`.example.com`), an IPv4 address, or an IPv6 address in brackets or not (`::1`, `[fd00::1]`).
 */
export function hostEntry(entry: string): string | undefined {
  const host = comparableHost(entry);
  // A zone (`%eth0`) names this host's interface: no host a call goes to is written with one.
  return HOST_NAME.test(host) || (!host.includes('%') && isIPv6(host)) ? host : undefined;
}
