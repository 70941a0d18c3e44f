import type { BlockList } from 'node:net';
import { invalidOption } from '../errors/index.js';
import { Memo } from '../memo/index.js';
import { inRanges, parseRange, PRIVATE_RANGES, rangeList, type IpRange } from '../net/index.js';

/**
 * Whose deadlines a server obeys: `'private'` (loopback, RFC 1918, link-local, IPv6 ULA, CGNAT and
 * local Unix sockets), `'all'`, `'none'`, or a list of IP addresses and CIDR ranges, IPv4 or IPv6.
 */
export type TrustInbound = 'private' | 'all' | 'none' | readonly string[];

/** The recorded peer of a request that came over a Unix domain socket: this host, not an address. */
export const LOCAL_SOCKET = 'unix';

/** True when `entry` is an IP address or a CIDR range (`10.0.0.0/8`, `fd00::/8`, `192.0.2.7`). */
export function isAddressOrRange(entry: string): boolean {
  return parseRange(entry) !== undefined;
}

/**
 * The one rule of which peers' deadlines are obeyed, shared by HTTP (`DeadlinePropagator`) and gRPC
 * servers. Addresses are matched with Node's `BlockList`; IPv4-mapped IPv6 peers match IPv4 ranges.
 */
export class PeerTrust {
  /** `'all'` or `'none'`: the answer needs no peer. */
  readonly fixed: boolean | undefined;
  readonly #ranges: BlockList;
  readonly #local: boolean;
  readonly #answers = new Memo<boolean>(256, 64);

  /** @throws LifelineError `ERR_INVALID_OPTION` naming `option` (and the entry) for a bad value. */
  constructor(trust: unknown = 'private', option = 'trustInbound') {
    this.fixed = trust === 'all' ? true : trust === 'none' ? false : undefined;
    this.#local = trust === 'private';
    const ranges: IpRange[] = [];
    if (trust === 'private') {
      ranges.push(...PRIVATE_RANGES);
    } else if (Array.isArray(trust)) {
      (trust as unknown[]).forEach((entry, i) => {
        const range = typeof entry === 'string' ? parseRange(entry) : undefined;
        if (range === undefined)
          throw invalidOption(`${option}[${String(i)}]`, entry, 'an IP address or CIDR range, e.g. 10.0.0.0/8 or fd00::/8');
        ranges.push(range);
      });
    } else if (this.fixed === undefined) {
      throw invalidOption(option, trust, "'private', 'all', 'none' or a list of IP addresses and CIDR ranges");
    }
    this.#ranges = rangeList(ranges);
  }

  /** Whether a deadline sent from `peer` (an IP address, {@link LOCAL_SOCKET}, or unknown) is obeyed. */
  trusts(peer: string | undefined): boolean {
    if (this.fixed !== undefined) return this.fixed;
    if (peer === undefined) return false;
    if (peer === LOCAL_SOCKET) return this.#local;
    // A service hears from few peers (a load balancer, sidecars): their answers are kept.
    return this.#answers.get(peer, this.#decide);
  }

  readonly #decide = (peer: string): boolean => inRanges(this.#ranges, peer);
}
