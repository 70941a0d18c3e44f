import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeadlineScope } from '../../src/deadline/index.js';

/**
 * Every call under one deadline waits on that deadline's one timer (`DeadlineScope.watch`), not
 * on a timer of its own: the timer runs only while a call waits, and each call is told once, at
 * the deadline and never before, unless it ended first.
 */
afterEach(() => {
  vi.useRealTimers();
});

/** The timers the fake clock has pending. */
function pendingTimers(): number {
  return vi.getTimerCount();
}

describe('calls sharing a deadline', () => {
  it('1,000 calls under one deadline arm one timer, and each is told once at the deadline', () => {
    vi.useFakeTimers();
    const scope = DeadlineScope.after(500, 'scope');
    const told: number[] = [];
    for (let i = 0; i < 1_000; i++) scope.watch((call: number) => told.push(call), i);
    expect(pendingTimers()).toBe(1);
    vi.advanceTimersByTime(499);
    expect(told).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(told.length).toBe(1_000);
    expect(new Set(told).size).toBe(1_000);
    expect(pendingTimers()).toBe(0);
  });

  it('the timer stops once every call has ended first (at the end of that turn of the loop), and starts again for a later call', () => {
    vi.useFakeTimers();
    const scope = DeadlineScope.after(500, 'scope');
    const watches = [0, 1, 2].map((i) => scope.watch(() => expect.unreachable(`call ${String(i)} ended first`), i));
    watches[1]?.cancel();
    watches[0]?.cancel();
    expect(pendingTimers()).toBe(1);
    watches[2]?.cancel();
    watches[2]?.cancel(); // idempotent
    // The next call of the same request, sent in the same turn (a query's continuation), keeps the timer.
    expect(pendingTimers()).toBe(2); // the deadline's timer, and the end of the turn
    scope.watch(() => expect.unreachable('the next call ended first'), undefined).cancel();
    scope.watch(() => expect.unreachable('the next call ended first'), undefined).cancel();
    expect(pendingTimers()).toBe(2);
    vi.advanceTimersByTime(0);
    expect(pendingTimers()).toBe(0);
    const told: string[] = [];
    scope.watch((name: string) => told.push(name), 'late');
    expect(pendingTimers()).toBe(1);
    vi.advanceTimersByTime(500);
    expect(told).toEqual(['late']);
  });

  it('a call that ends another at the deadline (a pool freeing a waiter) leaves that one untold', () => {
    vi.useFakeTimers();
    const scope = DeadlineScope.after(100, 'scope');
    const told: string[] = [];
    let second: { cancel(): void } | undefined;
    // Watchers are told newest first; whichever runs first cancels the other.
    second = scope.watch(() => {
      told.push('second');
      first.cancel();
    }, undefined);
    const first = scope.watch(() => {
      told.push('first');
      second?.cancel();
      second = undefined;
    }, undefined);
    vi.advanceTimersByTime(100);
    expect(told).toEqual(['first']);
    first.cancel(); // after it was told: nothing
    expect(pendingTimers()).toBe(0);
  });

  it('a deadline already past tells a call asynchronously, never inside watch()', () => {
    vi.useFakeTimers();
    const scope = DeadlineScope.after(0, 'scope');
    vi.advanceTimersByTime(5);
    const told: string[] = [];
    scope.watch((name: string) => told.push(name), 'call');
    expect(told).toEqual([]);
    vi.advanceTimersByTime(0);
    expect(told).toEqual(['call']);
  });

  it('the signal and the calls share the timer; release() stops the signal, not the calls still waiting', () => {
    vi.useFakeTimers();
    const scope = DeadlineScope.after(300, 'tick');
    const signal = scope.signal;
    const told: string[] = [];
    scope.watch((name: string) => told.push(name), 'call');
    expect(pendingTimers()).toBe(1);
    scope.release(); // the tick's run settled; a call it started lives on
    vi.advanceTimersByTime(300);
    expect(told).toEqual(['call']);
    expect(signal.aborted).toBe(false);
    expect(pendingTimers()).toBe(0);
  });

  it('a signal read alone aborts at the deadline with the deadline error', () => {
    vi.useFakeTimers();
    const scope = DeadlineScope.after(200, 'scope');
    const signal = scope.signal;
    const watch = scope.watch(() => expect.unreachable('ended first'), undefined);
    watch.cancel();
    expect(pendingTimers()).toBe(1); // the signal still waits
    vi.advanceTimersByTime(200);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as { code?: string }).code).toBe('ERR_DEADLINE_EXCEEDED');
  });

  it('a call whose onExpire throws does not keep the others from being told; its error is thrown after', () => {
    vi.useFakeTimers();
    const rethrown: (() => void)[] = [];
    const spy = vi.spyOn(globalThis, 'queueMicrotask').mockImplementation((callback) => {
      rethrown.push(callback);
    });
    try {
      const scope = DeadlineScope.after(100, 'scope');
      const told: number[] = [];
      for (const i of [1, 2, 3])
        scope.watch((call: number) => {
          told.push(call);
          if (call === 2) throw new Error('a pool callback threw');
        }, i);
      vi.advanceTimersByTime(100);
      expect(told.sort()).toEqual([1, 2, 3]);
      expect(rethrown).toHaveLength(1);
      expect(() => rethrown[0]?.()).toThrow('a pool callback threw');
    } finally {
      spy.mockRestore();
    }
  });
});
