import { describe, expect, it } from 'vitest';
import { currentDeadline, DeadlineExceededError, isDeadlineExceeded, LifelineError, withDeadline, withTimeout } from '../../src/index.js';
import { sleep } from '../support/tracing.js';

describe('deadline scopes (docs/deadlines.md)', () => {
  it('no deadline outside a scope', () => {
    expect(currentDeadline()).toBeUndefined();
  });

  it('withDeadline carries the deadline across awaits, with source scope', async () => {
    const at = Date.now() + 5_000;
    const seen = await withDeadline(new Date(at), async () => {
      await sleep(1);
      await Promise.resolve();
      return currentDeadline();
    });
    expect(seen?.at).toBe(at);
    expect(seen?.source).toBe('scope');
    expect(seen?.remainingMs()).toBeGreaterThan(4_000);
    expect(currentDeadline()).toBeUndefined();
  });

  it('a lazy thenable (a query builder: its work starts on .then) runs inside the deadline, once', async () => {
    let runs = 0;
    const builder = {
      then(resolve: (value: unknown) => void) {
        runs++;
        resolve(currentDeadline()?.source);
      },
    };
    // Without this the builder's `.then` is called by the caller's await, outside the scope.
    expect(await withTimeout(5_000, () => builder)).toBe('scope');
    expect(runs).toBe(1);
    const promise = Promise.resolve(1);
    expect(withTimeout(5_000, () => promise)).toBe(promise);
  });

  it('deadlines only shrink when nested', () => {
    const now = Date.now();
    withDeadline(now + 1_000, () => {
      expect(withDeadline(now + 5_000, () => currentDeadline()?.at)).toBe(now + 1_000);
      expect(withDeadline(now + 500, () => currentDeadline()?.at)).toBe(now + 500);
      expect(withTimeout(60_000, () => currentDeadline()?.at)).toBe(now + 1_000);
    });
  });

  it('concurrent scopes do not see each other', async () => {
    const results = await Promise.all(
      [300, 100, 200].map((ms) =>
        withTimeout(ms, async () => {
          await sleep(5);
          return Math.round((currentDeadline()?.remainingMs() ?? 0) / 100);
        }),
      ),
    );
    expect(results).toEqual([3, 1, 2]);
  });

  it('the signal aborts at the deadline with a DeadlineExceededError reason', async () => {
    const started = Date.now();
    const reason = await withTimeout(40, async () => {
      const signal = currentDeadline()?.signal;
      await new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }));
      return signal?.reason as unknown;
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(39);
    expect(reason).toBeInstanceOf(DeadlineExceededError);
    expect(isDeadlineExceeded(reason)).toBe(true);
  });

  it('a deadline already past gives an aborted signal and zero remaining', () => {
    withDeadline(Date.now() - 10, () => {
      expect(currentDeadline()?.remainingMs()).toBe(0);
      expect(currentDeadline()?.signal.aborted).toBe(true);
    });
  });

  it('a scope that throws rethrows, and the deadline is gone after it', () => {
    expect(() =>
      withTimeout(10, () => {
        throw new Error('inner');
      }),
    ).toThrow('inner');
    expect(currentDeadline()).toBeUndefined();
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, new Date('nope'), '2026-01-01' as unknown as number])(
    'withDeadline(%s) is an invalid option',
    (at) => {
      expect(() => withDeadline(at, () => 0)).toThrow(LifelineError);
      expect(() => withDeadline(at, () => 0)).toThrow(/invalid deadline/);
    },
  );

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])('withTimeout(%s) is an invalid option', (ms) => {
    expect(() => withTimeout(ms, () => 0)).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining(String(ms)) }),
    );
  });
});

describe('isDeadlineExceeded', () => {
  it('finds the error anywhere in the cause chain', () => {
    const inner = new DeadlineExceededError(Date.now(), 'tick');
    expect(isDeadlineExceeded(inner)).toBe(true);
    expect(isDeadlineExceeded(new TypeError('fetch failed', { cause: inner }))).toBe(true);
    expect(isDeadlineExceeded(new Error('a', { cause: new Error('b', { cause: inner }) }))).toBe(true);
    expect(isDeadlineExceeded(Object.assign(new Error('other copy'), { code: 'ERR_DEADLINE_EXCEEDED' }))).toBe(true);
  });

  it('is false for everything else, including cycles and non-errors', () => {
    const cyclic: Error & { cause?: unknown } = new Error('loop');
    cyclic.cause = cyclic;
    for (const value of [undefined, null, 'deadline', 42, new Error('x'), new DOMException('t', 'TimeoutError'), cyclic]) {
      expect(isDeadlineExceeded(value)).toBe(false);
    }
  });

  it('DeadlineExceededError has the public shape', () => {
    const at = Date.UTC(2026, 0, 1);
    const error = new DeadlineExceededError(at, 'inbound');
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ name: 'DeadlineExceededError', code: 'ERR_DEADLINE_EXCEEDED', deadline: at, source: 'inbound' });
    expect(error.message).toContain('2026-01-01T00:00:00.000Z');
  });
});

describe('deadlines at the edges of time', () => {
  it('refuses deadlines a Date cannot hold', () => {
    expect(() => withTimeout(Number.MAX_SAFE_INTEGER, () => 0)).toThrow(LifelineError);
    expect(() => withDeadline(8.64e15 + 1, () => 0)).toThrow(/invalid deadline/);
    expect(withDeadline(8.64e15, () => currentDeadline()?.at)).toBe(8.64e15);
  });
});
