import { describe, expect, it } from 'vitest';
import { errorText, MAX_TIMER_MS, numberOption } from '../../src/errors/index.js';
import { HealthCatalog, startWatchdog } from '../../src/index.js';

describe('numeric options: one rule, one message', () => {
  it('returns an allowed value; rejects anything else with ERR_INVALID_OPTION naming the option, the value and the rule', () => {
    expect(numberOption('interval', 15_000, { min: 0, above: true, max: MAX_TIMER_MS, unit: 'ms' })).toBe(15_000);
    const cases: [unknown, RegExp][] = [
      [0, /^invalid interval: 0 \(expected a number of ms > 0 and at most 2147483647\)$/],
      [MAX_TIMER_MS + 1, /^invalid interval: 2147483648 /],
      [Number.NaN, /^invalid interval: NaN /],
      [Number.POSITIVE_INFINITY, /^invalid interval: Infinity /],
      ['15000', /^invalid interval: "15000" /],
      [undefined, /^invalid interval: undefined /],
    ];
    for (const [value, message] of cases) {
      expect(() => numberOption('interval', value, { min: 0, above: true, max: MAX_TIMER_MS, unit: 'ms' })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_OPTION', message: expect.stringMatching(message) as string }),
      );
    }
    expect(() => numberOption('buffer', 1.5, { min: 1, integer: true })).toThrow(/^invalid buffer: 1\.5 \(expected an integer ≥ 1\)$/);
    expect(numberOption('port', 0, { min: 0, max: 65_535, integer: true })).toBe(0);
  });

  it('timer options stop at what a timer can wait (a longer one would fire at once)', () => {
    expect(() => new HealthCatalog({ interval: MAX_TIMER_MS + 1 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_OPTION' }));
    expect(() => startWatchdog({ thresholdMs: MAX_TIMER_MS + 1, exportSpans: false })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION' }),
    );
  });

  it("errorText: an error's message, a thrown string, else only the type (never an object's contents)", () => {
    expect(errorText(new Error('boom'))).toBe('boom');
    expect(errorText('plain')).toBe('plain');
    expect(errorText({ password: 'x' })).toBe('object');
    expect(errorText(undefined)).toBe('undefined');
  });
});
