import { BlockList, isIP } from 'node:net';
import { invalidOption } from '../errors/index.js';
import { Memo } from '../memo/index.js';

/**
 * Whose deadlines a server obeys: `'private'` (loopback, RFC 1918, link-local, IPv6 ULA, CGNAT and
 * local Unix sockets), `'all'`, `'none'`, or a list of IP addresses and CIDR ranges, IPv4 or IPv6.
 */
export type TrustInbound = 'private' | 'all' | 'none' | readonly string[];

/** The recorded peer of a request that came over a Unix domain socket: this host, not an address. */
export const LOCAL_SOCKET = 'unix';

const PRIVATE_V4: readonly (readonly [string, number])[] = [
  ['127.0.0.0', 8], // loopback
  ['10.0.0.0', 8],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['169.254.0.0', 16], // link-local
  ['100.64.0.0', 10], // CGNAT (RFC 6598), which some clusters use for pods
];
const PRIVATE_V6: readonly (readonly [string, number])[] = [
  ['::1', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
];

// Node reports IPv4 peers of a dual-stack socket as IPv4-mapped IPv6 (`::ffff:10.1.2.3`).
const MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** An IP address or CIDR range, as `trustInbound` and `LIFELINE_INBOUND_DEADLINES` take them. */
interface Range {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** `entry` as a range (a bare address is a /32 or /128), or `undefined` when it is not one. */
function parseRange(entry: string): Range | undefined {
  const match = /^([^/\s]+)(?:\/(\d{1,3}))?$/.exec(entry.trim());
  if (match?.[1] === undefined) return undefined;
  let address = match[1];
  let version = isIP(address);
  if (version === 0) return undefined;
  let prefix = match[2] === undefined ? (version === 4 ? 32 : 128) : Number(match[2]);
  if (prefix > (version === 4 ? 32 : 128)) return undefined;
  const mapped = MAPPED.exec(address);
  if (mapped?.[1] !== undefined && prefix >= 96) {
    address = mapped[1];
    version = 4;
    prefix -= 96;
  }
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

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
    this.#ranges = new BlockList();
    this.fixed = trust === 'all' ? true : trust === 'none' ? false : undefined;
    this.#local = trust === 'private';
    if (trust === 'private') {
      for (const [address, prefix] of PRIVATE_V4) this.#ranges.addSubnet(address, prefix, 'ipv4');
      for (const [address, prefix] of PRIVATE_V6) this.#ranges.addSubnet(address, prefix, 'ipv6');
    } else if (Array.isArray(trust)) {
      (trust as unknown[]).forEach((entry, i) => {
        const range = typeof entry === 'string' ? parseRange(entry) : undefined;
        if (range === undefined)
          throw invalidOption(`${option}[${String(i)}]`, entry, 'an IP address or CIDR range, e.g. 10.0.0.0/8 or fd00::/8');
        this.#ranges.addSubnet(range.address, range.prefix, range.family);
      });
    } else if (this.fixed === undefined) {
      throw invalidOption(option, trust, "'private', 'all', 'none' or a list of IP addresses and CIDR ranges");
    }
  }

  /** Whether a deadline sent from `peer` (an IP address, {@link LOCAL_SOCKET}, or unknown) is obeyed. */
  trusts(peer: string | undefined): boolean {
    if (this.fixed !== undefined) return this.fixed;
    if (peer === undefined) return false;
    if (peer === LOCAL_SOCKET) return this.#local;
    // A service hears from few peers (a load balancer, sidecars): their answers are kept.
    return this.#answers.get(peer, this.#decide);
  }

  readonly #decide = (peer: string): boolean => {
    const address = peer.replace(/%.*$/, ''); // a link-local peer may carry its zone (`fe80::1%eth0`)
    const mapped = MAPPED.exec(address)?.[1];
    if (mapped !== undefined) return this.#ranges.check(mapped, 'ipv4');
    const version = isIP(address);
    return version !== 0 && this.#ranges.check(address, version === 4 ? 'ipv4' : 'ipv6');
  };
}
