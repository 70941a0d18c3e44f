import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoTime } from '../../src/semconv/index.js';

describe('isoTime', () => {
  it('equals Date#toISOString for any time, in any order of calls', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.integer({ min: -8.64e15, max: 8.64e15 }),
            fc.integer({ min: 1.7e12, max: 1.8e12 }),
            fc.double({ min: 0, max: 2e12, noNaN: true }),
          ),
          { minLength: 1, maxLength: 20 },
        ),
        (times) => {
          for (const ms of times) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
