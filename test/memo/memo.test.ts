import { describe, expect, it } from 'vitest';
import { Memo } from '../../src/memo/index.js';

/** A Memo whose decisions are counted per key. */
function counted(maxKeys: number, maxKeyLength: number) {
  const calls = new Map<string, number>();
  const memo = new Memo<number>(maxKeys, maxKeyLength);
  const decide = (key: string): number => {
    calls.set(key, (calls.get(key) ?? 0) + 1);
    return key.length;
  };
  return { ask: (key: string) => memo.get(key, decide), calls: (key: string) => calls.get(key) ?? 0 };
}

describe('Memo', () => {
  it('decides each key once and answers it again from memory', () => {
    const { ask, calls } = counted(4, 16);
    expect([ask('a'), ask('bb'), ask('a'), ask('bb')]).toEqual([1, 2, 1, 2]);
    expect(calls('a')).toBe(1);
    expect(calls('bb')).toBe(1);
  });

  it('keeps at most maxKeys answers: a flood of distinct keys clears it, and old keys are decided again', () => {
    const { ask, calls } = counted(3, 16);
    for (const key of ['k0', 'k1', 'k2', 'k3']) ask(key); // k3 found it full: cleared, then k3 kept
    ask('k3');
    expect(calls('k3')).toBe(1);
    ask('k0');
    expect(calls('k0')).toBe(2);
  });

  it('never remembers a key longer than maxKeyLength', () => {
    const { ask, calls } = counted(8, 4);
    ask('short');
    ask('short');
    expect(calls('short')).toBe(2);
    ask('tiny');
    ask('tiny');
    expect(calls('tiny')).toBe(1);
  });
});
