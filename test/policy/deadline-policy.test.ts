import { describe, expect, it } from 'vitest';
import { DeadlinePolicy } from '../../src/policy/index.js';
import { installDeadlineDispatcher, LifelineError, type DeadlineRule } from '../../src/index.js';

const attrs = {
  'server.address': 'kubelet.local',
  'server.port': 10_250,
  'http.request.method': 'GET',
  'url.scheme': 'https',
  'url.path': '/pods',
};

describe('DeadlinePolicy', () => {
  it('the first rule whose every key matches gives its timeout', () => {
    const policy = new DeadlinePolicy({
      policy: [
        { match: { 'server.address': 'kubelet.local', 'http.request.method': 'POST' }, timeoutMs: 1 },
        { match: { 'server.address': 'kubelet.local', 'server.port': 10_250 }, timeoutMs: 2_000 },
        { match: { 'server.address': 'kubelet.local' }, timeoutMs: 3 },
      ],
    });
    expect(policy.ruleTimeout(attrs)).toBe(2_000);
    expect(policy.ruleTimeout({ ...attrs, 'server.address': 'other' })).toBeUndefined();
  });

  it('RegExp values match the string form, global flags do not leak state between calls', () => {
    const policy = new DeadlinePolicy({ policy: [{ match: { 'url.path': /^\/pods/g }, timeoutMs: 5 }] });
    for (let i = 0; i < 3; i++) expect(policy.ruleTimeout(attrs)).toBe(5);
  });

  it('reports emptiness and the default', () => {
    expect(new DeadlinePolicy().hasRules).toBe(false);
    expect(new DeadlinePolicy({ defaultTimeoutMs: 7 }).defaultTimeoutMs).toBe(7);
  });

  it.each([
    [{ policy: 'fast' as unknown as DeadlineRule[] }, 'policy: "fast"'],
    [{ policy: [null as unknown as DeadlineRule] }, 'policy[0]: null'],
    [{ policy: [{ match: { 'server.address': 'x' }, timeoutMs: 0 }] }, 'policy[0].timeoutMs: 0'],
    [{ policy: [{ match: {}, timeoutMs: 5 }] }, 'policy[0].match'],
    [{ policy: [{ match: { 'http.host': 'x' }, timeoutMs: 5 }] }, 'policy[0].match key: "http.host"'],
    [{ policy: [{ match: { 'server.address': true as unknown as string }, timeoutMs: 5 }] }, "policy[0].match['server.address']: true"],
    [{ defaultTimeoutMs: -1 }, 'defaultTimeoutMs: -1'],
  ])('invalid %j names the option and value', (options, text) => {
    expect(() => new DeadlinePolicy(options)).toThrow(LifelineError);
    expect(() => new DeadlinePolicy(options)).toThrow(text);
    expect(() => installDeadlineDispatcher(options)).toThrow(text);
  });
});
