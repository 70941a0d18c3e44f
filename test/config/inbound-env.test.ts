import { describe, expect, it } from 'vitest';
import { readEnvConfig } from '../../src/config/index.js';
import { DeadlinePropagator, LifelineError } from '../../src/index.js';

describe('LIFELINE_INBOUND_DEADLINES and LIFELINE_MIN_INBOUND_MS', () => {
  it('unset: nothing in the config (the propagator defaults to private, no minimum)', () => {
    const config = readEnvConfig({});
    expect(config.inboundDeadlines).toBeUndefined();
    expect(config.minInboundMs).toBeUndefined();
  });

  it.each([
    ['private', 'private'],
    ['all', 'all'],
    ['none', 'none'],
    [' 10.0.0.0/8, fd00::/8 ,192.0.2.7 ', ['10.0.0.0/8', 'fd00::/8', '192.0.2.7']],
  ])('%j -> %j, which DeadlinePropagator accepts', (value, expected) => {
    const { inboundDeadlines } = readEnvConfig({ LIFELINE_INBOUND_DEADLINES: value });
    expect(inboundDeadlines).toEqual(expected);
    expect(() => new DeadlinePropagator(inboundDeadlines === undefined ? {} : { trustInbound: inboundDeadlines })).not.toThrow();
  });

  it.each(['10.0.0.0/33', '10.0.0.0/8,', 'private,10.0.0.0/8', 'everyone', 'example.com', '10.0.0.0/8;fd00::/8', 'fd00::/129'])(
    'rejects %j naming the variable',
    (value) => {
      const read = () => readEnvConfig({ LIFELINE_INBOUND_DEADLINES: value });
      expect(read).toThrow(LifelineError);
      expect(read).toThrow(`invalid LIFELINE_INBOUND_DEADLINES=${JSON.stringify(value)}`);
    },
  );

  it('LIFELINE_MIN_INBOUND_MS: an integer from 0 to 300000 (the default maxInboundMs)', () => {
    expect(readEnvConfig({ LIFELINE_MIN_INBOUND_MS: '250' }).minInboundMs).toBe(250);
    expect(readEnvConfig({ LIFELINE_MIN_INBOUND_MS: '0' }).minInboundMs).toBe(0);
    for (const value of ['-1', '1.5', 'soon', '300001']) {
      expect(() => readEnvConfig({ LIFELINE_MIN_INBOUND_MS: value })).toThrow(`invalid LIFELINE_MIN_INBOUND_MS=${JSON.stringify(value)}`);
    }
  });
});
