import { context, defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  currentDeadline,
  DEADLINE_HEADER,
  DeadlinePropagator,
  LifelineError,
  withDeadline,
  withTimeout,
  type Deadline,
} from '../../src/index.js';

// Plain carriers have no recorded caller: these cases are about the header itself, so every caller is trusted.
const propagator = new DeadlinePropagator({ maxInboundMs: 60_000, trustInbound: 'all' });

function extract(headers: Record<string, unknown>, ctx: Context = ROOT_CONTEXT): Deadline | undefined {
  const extracted = propagator.extract(ctx, headers, defaultTextMapGetter);
  return context.with(extracted, () => currentDeadline());
}

describe('DeadlinePropagator (docs/deadlines.md)', () => {
  it('injects nothing, even under a deadline: the clients set the header, knowing the host', () => {
    const carrier: Record<string, string> = {};
    withTimeout(1_500, () => {
      propagator.inject(context.active(), carrier, defaultTextMapSetter);
    });
    withDeadline(Date.now() - 100, () => {
      propagator.inject(context.active(), carrier, defaultTextMapSetter);
    });
    propagator.inject(ROOT_CONTEXT, carrier, defaultTextMapSetter);
    expect(carrier).toEqual({});
  });

  it('extracts a budget as an inbound deadline', () => {
    const before = Date.now();
    const deadline = extract({ [DEADLINE_HEADER]: '750' });
    expect(deadline?.source).toBe('inbound');
    expect(deadline?.at).toBeGreaterThanOrEqual(before + 750);
    expect(deadline?.at).toBeLessThanOrEqual(Date.now() + 750);
  });

  it.each(['x-envoy-expected-rq-timeout-ms', 'connect-timeout-ms'])("a mesh's budget (%s) is an inbound deadline too", (header) => {
    const before = Date.now();
    const deadline = extract({ [header]: '1500' });
    expect(deadline?.source).toBe('inbound');
    expect(deadline?.at).toBeGreaterThanOrEqual(before + 1_500);
    expect(deadline?.at).toBeLessThanOrEqual(Date.now() + 1_500);
    expect(extract({ [header]: '99999999999' })?.remainingMs()).toBeLessThanOrEqual(60_000); // clamped alike
  });

  it('the smallest budget a request carries wins, whichever header brings it; a malformed one is skipped', () => {
    const sooner = (headers: Record<string, unknown>) => extract(headers)?.remainingMs();
    expect(sooner({ [DEADLINE_HEADER]: '5000', 'x-envoy-expected-rq-timeout-ms': '1500' })).toBeLessThanOrEqual(1_500);
    expect(
      sooner({ [DEADLINE_HEADER]: '800', 'x-envoy-expected-rq-timeout-ms': '15000', 'connect-timeout-ms': '3000' }),
    ).toBeLessThanOrEqual(800);
    expect(sooner({ [DEADLINE_HEADER]: '9000', 'connect-timeout-ms': '2000' })).toBeLessThanOrEqual(2_000);
    const skipped = sooner({ [DEADLINE_HEADER]: '4000', 'x-envoy-expected-rq-timeout-ms': '-1', 'connect-timeout-ms': ['1', '2'] });
    expect(skipped).toBeGreaterThan(3_000);
    expect(skipped).toBeLessThanOrEqual(4_000);
  });

  it('clamps budgets to maxInboundMs', () => {
    const deadline = extract({ [DEADLINE_HEADER]: '9999999999' });
    expect(deadline?.remainingMs()).toBeLessThanOrEqual(60_000);
    expect(deadline?.remainingMs()).toBeGreaterThan(59_000);
  });

  // Issue 12 item 8: an 11-digit budget was ignored (no deadline at all) instead of clamped.
  const LONG = ['12345678901', '99999999999999', '999999999999999', '1000000000000000', '9'.repeat(400), `00${'9'.repeat(30)}`];
  it.each(LONG.map((value) => [`${value.slice(0, 16)}${value.length > 16 ? '…' : ''} (${String(value.length)} digits)`, value]))(
    'clamps the long all-digit budget %s to maxInboundMs',
    (_label, value) => {
      const deadline = extract({ [DEADLINE_HEADER]: value });
      expect(deadline?.source).toBe('inbound');
      expect(deadline?.remainingMs()).toBeLessThanOrEqual(60_000);
      expect(deadline?.remainingMs()).toBeGreaterThan(59_000);
    },
  );

  it('reads leading zeros as the number they pad', () => {
    const deadline = extract({ [DEADLINE_HEADER]: `${'0'.repeat(40)}750` });
    expect(deadline?.remainingMs()).toBeLessThanOrEqual(750);
    expect(deadline?.remainingMs()).toBeGreaterThan(500);
  });

  it('keeps a tighter deadline already in the context', () => {
    withTimeout(100, () => {
      expect(extract({ [DEADLINE_HEADER]: '5000' }, context.active())?.source).toBe('scope');
    });
  });

  it.each([
    '',
    ' ',
    '-5',
    '1.5',
    '1e3',
    '0x10',
    'abc',
    '1234567890x',
    `${'9'.repeat(400)}.5`,
    '٣٠٠',
    '+5',
    '5 5',
    '5,5',
    'Infinity',
    'NaN',
  ])('ignores the malformed value %j', (value) => {
    expect(extract({ [DEADLINE_HEADER]: value })).toBeUndefined();
  });

  it('ignores repeated headers and non-string values', () => {
    expect(extract({ [DEADLINE_HEADER]: ['100', '200'] })).toBeUndefined();
    expect(extract({ [DEADLINE_HEADER]: 100 })).toBeUndefined();
    expect(extract({ [DEADLINE_HEADER]: ['300'] })?.source).toBe('inbound');
  });

  it('survives a getter that throws', () => {
    const hostile = {
      get: () => {
        throw new Error('boom');
      },
      keys: () => [],
    };
    expect(() => propagator.extract(ROOT_CONTEXT, {}, hostile)).not.toThrow();
  });

  it('fields() names the header; invalid maxInboundMs is rejected', () => {
    expect(propagator.fields()).toEqual([DEADLINE_HEADER]);
    expect(() => new DeadlinePropagator({ maxInboundMs: 0 })).toThrow(LifelineError);
    expect(() => new DeadlinePropagator({ maxInboundMs: Number.NaN })).toThrow(/maxInboundMs: NaN/);
  });

  it('fuzz: arbitrary header values never throw and never adopt an absurd deadline', () => {
    const value = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.stringMatching(/^[0-9]{0,20}$/),
      fc.integer().map(String),
      fc.double().map(String),
      fc.array(fc.string(), { maxLength: 3 }),
      fc.anything(),
    );
    fc.assert(
      fc.property(value, (raw) => {
        const before = Date.now();
        const deadline = extract({ [DEADLINE_HEADER]: raw });
        if (deadline === undefined) return;
        expect(deadline.source).toBe('inbound');
        expect(deadline.at).toBeGreaterThanOrEqual(before);
        expect(deadline.at).toBeLessThanOrEqual(Date.now() + 60_000);
        expect(Number.isFinite(deadline.at)).toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });
});

describe('DeadlinePropagator trust on carriers of unknown callers', () => {
  it("the default ('private') and lists ignore a carrier with no recorded caller; 'none' ignores all", () => {
    for (const options of [{}, { trustInbound: ['127.0.0.0/8'] }, { trustInbound: 'none' as const }]) {
      const extracted = new DeadlinePropagator(options).extract(ROOT_CONTEXT, { [DEADLINE_HEADER]: '500' }, defaultTextMapGetter);
      expect(context.with(extracted, () => currentDeadline())).toBeUndefined();
    }
  });

  it('minInboundMs raises a budget of 0 or 1 ms to the minimum', () => {
    const raising = new DeadlinePropagator({ trustInbound: 'all', minInboundMs: 250 });
    for (const budget of ['0', '1']) {
      const before = Date.now();
      const deadline = context.with(raising.extract(ROOT_CONTEXT, { [DEADLINE_HEADER]: budget }, defaultTextMapGetter), () =>
        currentDeadline(),
      );
      expect(deadline?.at).toBeGreaterThanOrEqual(before + 250);
      expect(deadline?.at).toBeLessThanOrEqual(Date.now() + 250);
    }
  });
});
