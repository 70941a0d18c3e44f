import { context } from '@opentelemetry/api';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeadlineScope, DeadlineTimer } from '../../src/deadline/index.js';
import { currentDeadline, DeadlinePropagator, DEADLINE_HEADER, HealthCatalog, withDeadline, withTimeout } from '../../src/index.js';
import { sleep } from '../support/tracing.js';

/**
 * Issue 12 item 6: deadlines are measured on the monotonic clock, so a step of the wall clock
 * (NTP, an operator, a VM resumed) neither stretches nor cuts them. Fake timers move the
 * monotonic clock (timers, `performance.now()`) with `advanceTimersByTime` and the wall clock
 * alone with `setSystemTime`, as a real step does.
 */
const STEP_MS = 20_000;
function stepWallClock(ms: number): void {
  vi.setSystemTime(Date.now() + ms);
}

afterEach(() => {
  vi.useRealTimers();
});

describe('deadlines across wall-clock steps', () => {
  it('a 500 ms deadline still aborts at 500 ms after the clock is stepped back by 20 s', () => {
    vi.useFakeTimers();
    const deadline = withTimeout(500, () => currentDeadline());
    const signal = deadline?.signal;
    vi.advanceTimersByTime(100);
    stepWallClock(-STEP_MS);
    expect(deadline?.remainingMs()).toBe(400);
    vi.advanceTimersByTime(399);
    expect(signal?.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(signal?.aborted).toBe(true);
  });

  it('a clock stepped forward by 20 s does not end a 500 ms deadline early', () => {
    vi.useFakeTimers();
    const deadline = withTimeout(500, () => currentDeadline());
    const signal = deadline?.signal;
    vi.advanceTimersByTime(100);
    stepWallClock(STEP_MS);
    vi.advanceTimersByTime(1);
    expect(deadline?.remainingMs()).toBe(399);
    expect(signal?.aborted).toBe(false);
    vi.advanceTimersByTime(399);
    expect(signal?.aborted).toBe(true);
  });

  it('the at shown stays the epoch time the deadline was made for', () => {
    vi.useFakeTimers();
    const start = Date.now();
    const deadline = withTimeout(500, () => currentDeadline());
    stepWallClock(-STEP_MS);
    expect(deadline?.at).toBe(start + 500);
  });

  it('a deadline given as a wall time is converted once, when it is made', () => {
    vi.useFakeTimers();
    const deadline = withDeadline(Date.now() + 500, () => currentDeadline());
    stepWallClock(-STEP_MS);
    vi.advanceTimersByTime(250);
    expect(deadline?.remainingMs()).toBe(250);
  });

  it.each([
    ['back', -STEP_MS],
    ['forward', STEP_MS],
  ])('the call timer (DeadlineTimer) fires at its deadline with the clock stepped %s', (_direction, step) => {
    vi.useFakeTimers();
    const scope = DeadlineScope.after(500, 'scope');
    const expired = vi.fn();
    const timer = new DeadlineTimer(scope.at, expired, undefined, scope.monotonicAt);
    const converted = vi.fn();
    new DeadlineTimer(Date.now() + 500, converted, undefined); // a wall-time deadline, converted at once
    vi.advanceTimersByTime(100);
    stepWallClock(step);
    vi.advanceTimersByTime(399);
    expect(expired).not.toHaveBeenCalled();
    expect(converted).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(expired).toHaveBeenCalledOnce();
    expect(converted).toHaveBeenCalledOnce();
    timer.cancel();
  });

  it('an inbound budget is counted on the monotonic clock, as is the span budget it sends on', () => {
    vi.useFakeTimers();
    const propagator = new DeadlinePropagator({ trustInbound: 'all' });
    const ctx = propagator.extract(
      context.active(),
      { [DEADLINE_HEADER]: '500' },
      { get: (carrier, key) => (carrier as Record<string, string>)[key], keys: () => [] },
    );
    stepWallClock(-STEP_MS);
    vi.advanceTimersByTime(100);
    const deadline = context.with(ctx, () => currentDeadline());
    expect(deadline?.remainingMs()).toBe(400);
    const signal = deadline?.signal;
    vi.advanceTimersByTime(400);
    expect(signal?.aborted).toBe(true);
  });

  it("a tick's deadline is kept across a step back", () => {
    vi.useFakeTimers();
    const health = new HealthCatalog({ interval: 100, maxMissedTicks: 2 });
    try {
      const tick = health.registerLiveness('worker').take();
      const signal = tick?.signal;
      stepWallClock(-STEP_MS);
      vi.advanceTimersByTime(100); // the first tick's deadline is one interval after registration
      expect(signal?.aborted).toBe(true);
    } finally {
      health.close();
    }
  });
});

describe('the healthcheck self-check across wall-clock steps', () => {
  // Only Date is faked: rounds run on real timers and a stall is real time with no round.
  function stall(ms: number): void {
    const until = performance.now() + ms;
    while (performance.now() < until) {
      // spin, as a stuck synchronous computation would
    }
  }

  it('a clock stepped forward by 20 s does not fail a healthy catalog', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const health = new HealthCatalog({ interval: 100 });
    try {
      health.registerLiveness('c').take();
      await sleep(250);
      expect(health.status('live').healthy).toContain('healthcheck');
      stepWallClock(STEP_MS);
      expect(health.status('live').healthy).toContain('healthcheck');
    } finally {
      health.close();
    }
  });

  it('a clock stepped back by 20 s does not hide a stalled event loop', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const health = new HealthCatalog({ interval: 100 });
    try {
      health.registerLiveness('c').take();
      await sleep(250);
      expect(health.status('live').healthy).toContain('healthcheck');
      stepWallClock(-STEP_MS);
      stall(450);
      expect(health.status('live').unhealthy).toContain('healthcheck');
    } finally {
      health.close();
    }
  });
});
