import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PeerTrust } from '../../src/inbound/index.js';
import { ipAddress, isLoopback, isPrivateAddress, parseRange, unmapped } from '../../src/net/index.js';

describe('unmapped', () => {
  it.each([
    ['::ffff:10.1.2.3', '10.1.2.3'],
    ['::FFFF:127.0.0.1', '127.0.0.1'],
    ['10.1.2.3', '10.1.2.3'],
    ['::1', '::1'],
    ['::ffff:a01:203', '::ffff:a01:203'],
    ['::ffff:1234.1.1.1', '::ffff:1234.1.1.1'],
  ])('%s -> %s', (address, expected) => {
    expect(unmapped(address)).toBe(expected);
  });
});

describe('ipAddress', () => {
  it('drops a zone, maps IPv4-mapped IPv6 to IPv4, and refuses what is not an address', () => {
    expect(ipAddress('fe80::1%eth0')).toEqual({ address: 'fe80::1', family: 'ipv6' });
    expect(ipAddress('::ffff:10.0.0.1')).toEqual({ address: '10.0.0.1', family: 'ipv4' });
    expect(ipAddress('[::1]')).toBeUndefined();
    expect(ipAddress('127.foo')).toBeUndefined();
    expect(ipAddress('')).toBeUndefined();
  });
});

describe('isLoopback: the loopback ranges PeerTrust holds', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.3.2.1', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['10.0.0.1', false],
    ['::ffff:10.0.0.1', false],
    ['1270::1', false],
    ['', false],
    [undefined, false],
  ])('%s -> %s', (address, expected) => {
    expect(isLoopback(address)).toBe(expected);
  });

  // Where the probe server's own copy (a string prefix test) answered otherwise. Node reports peers
  // in lower-case canonical form, so no socket's address is answered differently.
  it.each([
    ['::FFFF:127.0.0.1', true], // was false: the IPv4-mapped prefix was matched case-sensitively
    ['0:0:0:0:0:0:0:1', true], // was false: only the string '::1' was IPv6 loopback
    ['::1%lo', true], // was false: a zone was not dropped
    ['127.foo', false], // was true: any string starting '127.' was loopback
  ])('%s -> %s (changed)', (address, expected) => {
    expect(isLoopback(address)).toBe(expected);
  });

  it('fuzz: loopback is private, and private is what PeerTrust trusts', () => {
    const trust = new PeerTrust('private');
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.ipV4(),
          fc.ipV6(),
          fc.ipV4Extended(),
          fc.ipV4().map((a) => `::ffff:${a}`),
        ),
        (address) => {
          if (isLoopback(address)) expect(isPrivateAddress(address)).toBe(true);
          // 'unix' is PeerTrust's name for a Unix socket peer, not an address.
          if (address !== 'unix') expect(isPrivateAddress(address)).toBe(trust.trusts(address));
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe('parseRange', () => {
  it.each([
    ['10.0.0.0/8', { address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
    ['192.0.2.7', { address: '192.0.2.7', prefix: 32, family: 'ipv4' }],
    [' fd00::/8 ', { address: 'fd00::', prefix: 8, family: 'ipv6' }],
    ['::ffff:198.51.100.0/120', { address: '198.51.100.0', prefix: 24, family: 'ipv4' }],
    ['::ffff:198.51.100.0/64', { address: '::ffff:198.51.100.0', prefix: 64, family: 'ipv6' }],
  ])('%s', (entry, range) => {
    expect(parseRange(entry)).toEqual(range);
  });

  it.each(['10.0.0.0/33', '::/129', 'example.com', '10.0.0.0/', '', '10.0.0.0 /8'])('%j is not a range', (entry) => {
    expect(parseRange(entry)).toBeUndefined();
  });
});
