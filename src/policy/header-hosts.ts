import { invalidOption } from '../errors/index.js';
import { Memo } from '../memo/index.js';
import { comparableHost, hostEntry, ipAddress, isPrivateAddress } from '../net/index.js';
import { stateless } from './stateless-regexp.js';

/**
 * The hosts an outgoing call tells its deadline (`x-request-timeout-ms`): `'internal'` (IP literals
 * in loopback, private, CGNAT, link-local and IPv6 ULA ranges; single-label names such as `redis`;
 * `localhost`; names ending `.local`, `.internal`, `.svc`, `.cluster.local` or `.localhost`),
 * `'all'`, `'none'`, or a list of exact host names (`api.example.com`), suffixes (`.example.com`:
 * its subdomains), RegExps tested against the lower-case host name, and `'internal'` itself.
 */
export type DeadlineHeaderHosts = 'internal' | 'all' | 'none' | readonly (string | RegExp)[];

// '.cluster.local' ends in '.local'.
const INTERNAL_SUFFIXES: readonly string[] = ['.local', '.internal', '.svc', '.localhost'];
const EXPECTED = "'internal', 'all', 'none' or a list of host names, '.suffix'es, RegExps and 'internal'";

/** The validated `deadlineHeaderHosts` of a policy. */
export class HeaderHosts {
  /** `'all'` or `'none'`: the answer needs no host. */
  readonly fixed: boolean | undefined;
  readonly #internal: boolean;
  readonly #names: ReadonlySet<string>;
  readonly #suffixes: readonly string[];
  readonly #patterns: readonly RegExp[];
  /** Answers per host as given: a service calls the same few hosts over and over. */
  readonly #answers = new Memo<boolean>(256, 255);

  constructor(hosts: unknown = 'internal') {
    this.fixed = hosts === 'all' ? true : hosts === 'none' ? false : undefined;
    const names = new Set<string>();
    const suffixes: string[] = [];
    const patterns: RegExp[] = [];
    let internal = hosts === 'internal';
    if (Array.isArray(hosts)) {
      (hosts as unknown[]).forEach((entry, i) => {
        if (entry instanceof RegExp) {
          patterns.push(stateless(entry));
          return;
        }
        const host = typeof entry === 'string' ? hostEntry(entry) : undefined;
        if (host === 'internal') internal = true;
        else if (host === undefined)
          throw invalidOption(`deadlineHeaderHosts[${String(i)}]`, entry, "a host name, a '.suffix', a RegExp or 'internal'");
        else if (host.startsWith('.')) suffixes.push(host);
        else names.add(host);
      });
    } else if (this.fixed === undefined && !internal) {
      throw invalidOption('deadlineHeaderHosts', hosts, EXPECTED);
    }
    this.#internal = internal;
    this.#names = names;
    this.#suffixes = suffixes;
    this.#patterns = patterns;
  }

  /** Whether a call to `host` (a host name or IP literal, IPv6 with or without brackets) carries the header. */
  includes(host: string): boolean {
    if (this.fixed !== undefined) return this.fixed;
    return this.#answers.get(host, this.#decide);
  }

  readonly #decide = (host: string): boolean => {
    const name = comparableHost(host);
    if (name === '') return false;
    if (this.#internal && isInternal(name)) return true;
    if (this.#names.has(name)) return true;
    for (const suffix of this.#suffixes) if (name.endsWith(suffix)) return true;
    for (const pattern of this.#patterns) if (pattern.test(name)) return true;
    return false;
  };
}

function isInternal(name: string): boolean {
  // One address rule for both directions: the addresses whose deadlines a server trusts are the internal ones.
  if (ipAddress(name) !== undefined) return isPrivateAddress(name);
  if (!name.includes('.')) return true; // single label: a Kubernetes service, a Compose service, localhost
  for (const suffix of INTERNAL_SUFFIXES) if (name.endsWith(suffix)) return true;
  return false;
}
