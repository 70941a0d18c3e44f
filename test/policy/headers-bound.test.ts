import { describe, expect, it } from 'vitest';
import { DeadlineScope } from '../../src/deadline/index.js';
import { callDeadline, DeadlinePolicy, HeaderHosts } from '../../src/policy/index.js';
import {
  grpcDeadlineInterceptor,
  installDeadlineDispatcher,
  installHttpDeadlines,
  LifelineError,
  type DeadlinePolicyOptions,
} from '../../src/index.js';

const attributes = () => ({ 'server.address': 'api.example.com', 'server.port': 443 });

describe('callDeadline and headersTimeoutMs', () => {
  it('bounds only the head of a call nothing else bounds, with source headers', () => {
    const before = Date.now();
    const deadline = callDeadline(new DeadlinePolicy({ headersTimeoutMs: 1_000 }), undefined, attributes);
    expect(deadline).toMatchObject({ source: 'headers', fromPolicy: true, untilHeaders: true });
    expect(deadline?.at).toBeGreaterThanOrEqual(before + 1_000);
    expect(deadline?.at).toBeLessThanOrEqual(Date.now() + 1_000);
  });

  it('steps aside for a context deadline, a matching rule and defaultTimeoutMs, however long', () => {
    const far = new DeadlineScope(Date.now() + 3_600_000, 'scope');
    expect(callDeadline(new DeadlinePolicy({ headersTimeoutMs: 1_000 }), far, attributes)).toMatchObject({
      at: far.at,
      source: 'scope',
      untilHeaders: false,
    });
    const rule = new DeadlinePolicy({
      headersTimeoutMs: 1_000,
      policy: [{ match: { 'server.address': 'api.example.com' }, timeoutMs: 600_000 }],
    });
    expect(callDeadline(rule, undefined, attributes)).toMatchObject({ source: 'policy', untilHeaders: false });
    expect(callDeadline(new DeadlinePolicy({ headersTimeoutMs: 1_000, defaultTimeoutMs: 600_000 }), undefined, attributes)).toMatchObject({
      source: 'policy',
      untilHeaders: false,
    });
  });

  it('a headers bound in the context (a call being dispatched) is no deadline for calls below it', () => {
    const inDispatch = new DeadlineScope(Date.now() + 5, 'headers');
    expect(callDeadline(new DeadlinePolicy(), inDispatch, attributes)).toBeUndefined();
  });

  it('0 turns it off; rules need attributes only when there are rules', () => {
    expect(callDeadline(new DeadlinePolicy({ headersTimeoutMs: 0 }), undefined, attributes)).toBeUndefined();
    expect(new DeadlinePolicy({ headersTimeoutMs: 0 }).headersTimeoutMs).toBeUndefined();
    const never = () => {
      throw new Error('attributes read without rules');
    };
    expect(callDeadline(new DeadlinePolicy({ headersTimeoutMs: 5, defaultTimeoutMs: 7 }), undefined, never)?.source).toBe('policy');
  });
});

describe("deadlineHeaderHosts: 'internal' (the default)", () => {
  const internal = new HeaderHosts();
  it.each([
    '127.0.0.1',
    '127.9.9.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '::1',
    '[::1]',
    'fd12:3456::1',
    'fe80::1',
    '::ffff:10.0.0.1',
    'localhost',
    'LOCALHOST',
    'redis',
    'payments.',
    'printer.local',
    'metadata.google.internal',
    'payments.default.svc',
    'payments.default.svc.cluster.local',
    'app.localhost',
  ])('%s is internal', (host) => {
    expect(internal.includes(host)).toBe(true);
  });

  it.each([
    '8.8.8.8',
    '172.32.0.1',
    '192.169.0.1',
    '2001:4860::8888',
    'api.example.com',
    'example.com',
    'local.example.com',
    'svc.example.com',
    'localhost.example.com',
    '',
  ])('%j is not', (host) => {
    expect(internal.includes(host)).toBe(false);
  });
});

describe('deadlineHeaderHosts: all, none, lists', () => {
  it("'all' and 'none'", () => {
    expect(new HeaderHosts('all').includes('api.example.com')).toBe(true);
    expect(new HeaderHosts('none').includes('127.0.0.1')).toBe(false);
  });

  it('names match exactly, .suffixes match subdomains, RegExps the lower-case name, and internal can be added', () => {
    const hosts = new HeaderHosts(['API.partner.net.', '.corp.example.com', /^edge-\d+\.cdn\.net$/g, 'internal']);
    expect(hosts.includes('api.partner.net')).toBe(true);
    expect(hosts.includes('other.partner.net')).toBe(false);
    expect(hosts.includes('a.b.corp.example.com')).toBe(true);
    expect(hosts.includes('corp.example.com')).toBe(false);
    for (let i = 0; i < 3; i++) expect(hosts.includes('EDGE-7.cdn.net')).toBe(true); // no lastIndex carried over
    expect(hosts.includes('10.0.0.1')).toBe(true);
    expect(new HeaderHosts(['api.partner.net']).includes('10.0.0.1')).toBe(false);
    expect(new HeaderHosts([]).includes('localhost')).toBe(false);
  });
});

describe('invalid options are rejected with a LifelineError naming the option', () => {
  const cases: [DeadlinePolicyOptions, string][] = [
    [{ headersTimeoutMs: -1 }, 'headersTimeoutMs: -1'],
    [{ headersTimeoutMs: Number.NaN }, 'headersTimeoutMs: NaN'],
    [{ headersTimeoutMs: '60000' as unknown as number }, 'headersTimeoutMs: "60000"'],
    [{ headersTimeoutMs: Infinity }, 'headersTimeoutMs: Infinity'],
    [{ deadlineHeaderHosts: 'private' as unknown as 'internal' }, 'deadlineHeaderHosts: "private"'],
    [{ deadlineHeaderHosts: 'api.example.com' as unknown as 'internal' }, 'deadlineHeaderHosts: "api.example.com"'],
    [{ deadlineHeaderHosts: ['ok.example.com', 'not a host'] }, 'deadlineHeaderHosts[1]: "not a host"'],
    [{ deadlineHeaderHosts: ['https://api.example.com'] }, 'deadlineHeaderHosts[0]: "https://api.example.com"'],
    [{ deadlineHeaderHosts: ['.'] }, 'deadlineHeaderHosts[0]: "."'],
    [{ deadlineHeaderHosts: [42 as unknown as string] }, 'deadlineHeaderHosts[0]: 42'],
  ];
  it.each(cases)('%j', (options, text) => {
    for (const install of [
      () => new DeadlinePolicy(options),
      () => installDeadlineDispatcher(options),
      () => installHttpDeadlines(options),
      () => grpcDeadlineInterceptor(options),
    ]) {
      expect(install).toThrow(LifelineError);
      expect(install).toThrow(text);
    }
  });
});
