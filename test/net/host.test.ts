import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readEnvConfig } from '../../src/config/index.js';
import { HeaderHosts } from '../../src/policy/index.js';
import { bracketed, comparableHost, hostEntry, splitHostPort, unbracketed } from '../../src/net/index.js';

describe('the bracket rule: brackets enclose an IPv6 literal and nothing else', () => {
  it.each([
    ['[::1]', '::1'],
    ['[fd00::1]', 'fd00::1'],
    ['::1', '::1'],
    ['[::1', '[::1'],
    ['::1]', '::1]'],
    ['[10.0.0.1]', '[10.0.0.1]'],
    ['[localhost]', '[localhost]'],
    ['[]', '[]'],
  ])('unbracketed(%j) is %j', (host, expected) => {
    expect(unbracketed(host)).toBe(expected);
  });

  it.each([
    ['localhost', 'localhost', undefined],
    ['localhost:5555', 'localhost', '5555'],
    ['127.0.0.1:80', '127.0.0.1', '80'],
    ['[::1]', '::1', undefined],
    ['[::1]:5555', '::1', '5555'],
  ])('splitHostPort(%j)', (authority, host, port) => {
    expect(splitHostPort(authority)).toEqual({ host, port });
  });

  it.each(['', '::1', '::1:5555', 'localhost:', 'localhost:123456', '127.0.0.1:80:80', '[::1]x', '[::1]:', '[localhost]:80', '[::1'])(
    'splitHostPort(%j) is undefined',
    (authority) => {
      expect(splitHostPort(authority)).toBeUndefined();
    },
  );

  it('bracketed: IPv6 literals only, the inverse of unbracketed', () => {
    expect(bracketed('::1')).toBe('[::1]');
    expect(bracketed('fe80::1%eth0')).toBe('[fe80::1%eth0]');
    expect(bracketed('127.0.0.1')).toBe('127.0.0.1');
    expect(bracketed('localhost')).toBe('localhost');
    for (const host of ['::1', 'fd00::1', '10.0.0.1', 'localhost']) expect(unbracketed(bracketed(host))).toBe(host);
  });

  it('comparableHost: lower case, no IPv6 brackets, no trailing dot', () => {
    expect(comparableHost('API.Example.COM.')).toBe('api.example.com');
    expect(comparableHost('[FD00::1]')).toBe('fd00::1');
    expect(comparableHost('[10.0.0.1]')).toBe('[10.0.0.1]');
  });
});

/** Whether `LIFELINE_DEADLINE_HEADER_HOSTS` takes `entry` (as a one-entry list). */
function envTakes(entry: string): boolean {
  try {
    readEnvConfig({ LIFELINE_DEADLINE_HEADER_HOSTS: `${entry},billing` });
    return true;
  } catch {
    return false;
  }
}

/** Whether `deadlineHeaderHosts` takes `entry`. */
function optionTakes(entry: string): boolean {
  try {
    new HeaderHosts([entry]);
    return true;
  } catch {
    return false;
  }
}

describe('one deadlineHeaderHosts grammar for the option and LIFELINE_DEADLINE_HEADER_HOSTS', () => {
  it.each([
    'api.example.com',
    '.corp.example.com',
    'redis',
    'internal',
    '10.0.0.1',
    'fd00::1',
    '[fd00::1]',
    '[::1]',
    'svc_1',
    'api.example.com.',
  ])('%j is taken by both', (entry) => {
    expect(hostEntry(entry)).toBeDefined();
    expect(envTakes(entry)).toBe(true);
    expect(optionTakes(entry)).toBe(true);
  });

  it.each(['https://api.example.com', 'a..b', '.', '[::1]:5555', 'fe80::1%eth0', 'api example'])('%j is refused by both', (entry) => {
    expect(hostEntry(entry)).toBeUndefined();
    expect(envTakes(entry)).toBe(false);
    expect(optionTakes(entry)).toBe(false);
  });

  // Where the two copies differed; each case failed on the copy that changed.
  it.each(['[::1', '::1]', ':', ':::', 'abc:', '1:2'])(
    '%j (an unbalanced bracket, not an IPv6 address) is refused by the variable too',
    (entry) => {
      expect(envTakes(entry)).toBe(false);
    },
  );

  it('a fully qualified name with its trailing dot is taken by the variable too', () => {
    expect(envTakes('api.example.com.')).toBe(true);
    expect(readEnvConfig({ LIFELINE_DEADLINE_HEADER_HOSTS: 'api.example.com.' }).deadlineHeaderHosts).toEqual(['api.example.com.']);
  });

  it.each(['[10.0.0.1]', '[api.example.com]', 'a..b', '..', 'cafe..babe', '1.2..3', ':::'])(
    '%j (brackets around no IPv6 address, an empty label, not an IPv6 address) is refused by the option too',
    (entry) => {
      expect(optionTakes(entry)).toBe(false);
    },
  );

  it('a host in brackets that is no IPv6 address is not unbracketed when calls are matched', () => {
    expect(new HeaderHosts(['api.example.com']).includes('[api.example.com]')).toBe(false);
    expect(new HeaderHosts().includes('[10.0.0.1]')).toBe(false);
    expect(new HeaderHosts().includes('[::1]')).toBe(true);
  });

  it('fuzz: the variable and the option take the same entries', () => {
    const entry = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.stringMatching(/^[[\]a-f0-9:.]{0,12}$/),
      fc.domain(),
      fc.ipV6(),
      fc.ipV6().map((a) => `[${a}]`),
    );
    fc.assert(
      fc.property(entry, (value) => {
        // The variable splits on commas and trims; an entry with neither is passed as it is.
        fc.pre(!value.includes(',') && value.trim() === value && value !== '' && !['internal', 'all', 'none'].includes(value));
        expect(envTakes(value)).toBe(optionTakes(value));
      }),
      { numRuns: 2_000 },
    );
  });
});
