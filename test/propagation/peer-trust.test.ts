import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LOCAL_SOCKET, PeerTrust } from '../../src/inbound/index.js';

/** The one rule of whose deadlines are obeyed, by address, as HTTP and gRPC servers apply it. */
describe('PeerTrust', () => {
  const privateTrust = new PeerTrust('private');

  it.each([
    ['127.0.0.1', true],
    ['127.255.0.9', true],
    ['10.1.2.3', true],
    ['172.16.0.1', true],
    ['172.31.255.255', true],
    ['172.32.0.1', false],
    ['192.168.7.7', true],
    ['192.169.0.1', false],
    ['169.254.169.254', true],
    ['100.64.0.1', true],
    ['100.127.255.255', true],
    ['100.128.0.1', false],
    ['8.8.8.8', false],
    ['::1', true],
    ['::2', false],
    ['fd12:3456::1', true],
    ['fc00::1', true],
    ['fe80::1', true],
    ['fe80::1%eth0', true],
    ['2001:db8::1', false],
    ['::ffff:10.0.0.1', true],
    ['::FFFF:127.0.0.1', true],
    ['::ffff:8.8.8.8', false],
    [LOCAL_SOCKET, true],
    ['', false],
    ['not an address', false],
    [undefined, false],
  ])("'private' trusts %j: %s", (peer, trusted) => {
    expect(privateTrust.trusts(peer)).toBe(trusted);
  });

  it('a list: IPv4 and IPv6 ranges and bare addresses; mapped peers match IPv4 ranges; Unix sockets are not listed', () => {
    const list = new PeerTrust(['10.0.0.0/8', '2001:db8::/32', '192.0.2.7', '::ffff:198.51.100.0/120']);
    expect(list.trusts('10.200.0.1')).toBe(true);
    expect(list.trusts('::ffff:10.200.0.1')).toBe(true);
    expect(list.trusts('11.0.0.1')).toBe(false);
    expect(list.trusts('2001:db8:ffff::1')).toBe(true);
    expect(list.trusts('2001:db9::1')).toBe(false);
    expect(list.trusts('192.0.2.7')).toBe(true);
    expect(list.trusts('192.0.2.8')).toBe(false);
    expect(list.trusts('198.51.100.42')).toBe(true);
    expect(list.trusts('127.0.0.1')).toBe(false);
    expect(list.trusts(LOCAL_SOCKET)).toBe(false);
  });

  it("'all' and 'none' need no peer", () => {
    expect(new PeerTrust('all').trusts(undefined)).toBe(true);
    expect(new PeerTrust('none').trusts('127.0.0.1')).toBe(false);
    expect(new PeerTrust([]).trusts('127.0.0.1')).toBe(false);
  });

  it('fuzz: any peer string is answered, never thrown on', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.ipV4(), fc.ipV6(), fc.ipV4Extended()), (peer) => {
        expect(typeof privateTrust.trusts(peer)).toBe('boolean');
      }),
      { numRuns: 2_000 },
    );
  });
});
