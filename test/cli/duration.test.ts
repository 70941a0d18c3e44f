import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/cli/duration.js';

describe('parseDuration', () => {
  it.each([
    ['20s', 20_000],
    ['500ms', 500],
    ['1.5m', 90_000],
    ['2h', 7_200_000],
    ['3', 3_000],
    [' 7s ', 7_000],
  ])('%s = %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '0', '0s', '-1s', 's', '1d', '1e3s', 'NaN', '1..2s', `${'9'.repeat(400)}s`])('%j is not a duration', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});
