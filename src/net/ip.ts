import { BlockList, isIP } from 'node:net';

/** An address family as Node's `BlockList` names it. */
export type IpFamily = 'ipv4' | 'ipv6';

/** An IP address or CIDR range: a bare address is a /32 or /128. */
export interface IpRange {
  readonly address: string;
  readonly prefix: number;
  readonly family: IpFamily;
}

/** 127.0.0.0/8 and ::1. In a Kubernetes pod every container, and a mesh sidecar forwarding outside traffic, is loopback too. */
export const LOOPBACK_RANGES: readonly IpRange[] = [
  { address: '127.0.0.0', prefix: 8, family: 'ipv4' },
  { address: '::1', prefix: 128, family: 'ipv6' },
];

/**
 * Loopback, RFC 1918, link-local, CGNAT and IPv6 unique local: the addresses of this host and of
 * its network, whose deadlines a server obeys by default and which an outgoing call tells its own.
 */
export const PRIVATE_RANGES: readonly IpRange[] = [
  ...LOOPBACK_RANGES,
  { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
  { address: '172.16.0.0', prefix: 12, family: 'ipv4' },
  { address: '192.168.0.0', prefix: 16, family: 'ipv4' },
  { address: '169.254.0.0', prefix: 16, family: 'ipv4' }, // link-local
  { address: '100.64.0.0', prefix: 10, family: 'ipv4' }, // CGNAT (RFC 6598), which some clusters use for pods
  { address: 'fc00::', prefix: 7, family: 'ipv6' }, // unique local
  { address: 'fe80::', prefix: 10, family: 'ipv6' }, // link-local
];

// Node reports IPv4 peers of a dual-stack socket as IPv4-mapped IPv6 (`::ffff:10.1.2.3`).
const MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** `::ffff:1.2.3.4` (any case) as `1.2.3.4`; any other string as it is. */
export function unmapped(address: string): string {
  return MAPPED.exec(address)?.[1] ?? address;
}

/**
 * `address` as ranges are matched against it: without the zone a link-local peer may carry
 * (`fe80::1%eth0`), IPv4-mapped IPv6 as IPv4; `undefined` when it is not an IP address.
 */
export function ipAddress(address: string): { readonly address: string; readonly family: IpFamily } | undefined {
  const bare = unmapped(address.replace(/%.*$/, ''));
  const version = isIP(bare);
  return version === 0 ? undefined : { address: bare, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * `entry` as a range (`10.0.0.0/8`, `fd00::/8`, a bare address), or `undefined` when it is not one.
 * An IPv4-mapped range of at least /96 is the IPv4 range it maps.
 */
export function parseRange(entry: string): IpRange | undefined {
  const match = /^([^/\s]+)(?:\/(\d{1,3}))?$/.exec(entry.trim());
  if (match?.[1] === undefined) return undefined;
  const version = isIP(match[1]);
  if (version === 0) return undefined;
  const bits = version === 4 ? 32 : 128;
  const prefix = match[2] === undefined ? bits : Number(match[2]);
  if (prefix > bits) return undefined;
  const address = unmapped(match[1]);
  if (address !== match[1] && prefix >= 96) return { address, prefix: prefix - 96, family: 'ipv4' };
  return { address: match[1], prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/** A `BlockList` holding `ranges`, to match addresses against (see {@link inRanges}). */
export function rangeList(ranges: readonly IpRange[]): BlockList {
  const list = new BlockList();
  for (const { address, prefix, family } of ranges) list.addSubnet(address, prefix, family);
  return list;
}

/** Whether `address` (an IP address, perhaps IPv4-mapped or with a zone) is in `list`; false for anything else. */
export function inRanges(list: BlockList, address: string | undefined): boolean {
  const ip = address === undefined ? undefined : ipAddress(address);
  return ip !== undefined && list.check(ip.address, ip.family);
}

const loopback = rangeList(LOOPBACK_RANGES);
const privateRanges = rangeList(PRIVATE_RANGES);

/** True for an address in {@link LOOPBACK_RANGES}, IPv4-mapped or not. */
export function isLoopback(address: string | undefined): boolean {
  return inRanges(loopback, address);
}

/** True for an address in {@link PRIVATE_RANGES}, IPv4-mapped or not. */
export function isPrivateAddress(address: string | undefined): boolean {
  return inRanges(privateRanges, address);
}
