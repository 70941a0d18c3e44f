import { InstrumentationBase, isWrapped } from '@opentelemetry/instrumentation';
import { describe, expect, it } from 'vitest';
import { wrapMethod } from '../../src/hooks/index.js';

/**
 * lifeline's wrappers beside OpenTelemetry's (shimmer, through a real InstrumentationBase): an
 * instrumentation that patches one method twice (pg: lib/client.js, then the package's Client)
 * replaces its first wrapper by shimmer's marks, and must still do so with lifeline's in between.
 */
class Patcher extends InstrumentationBase {
  constructor() {
    super('test-patcher', '1.0.0', { enabled: false });
  }
  protected init(): [] {
    return [];
  }
  /** What OpenTelemetry's instrumentations do on each patch: unwrap theirs if wrapped, then wrap. */
  patch(target: Target, calls: string[]): void {
    if (isWrapped(target.work)) this._unwrap(target, 'work');
    this._wrap(
      target,
      'work',
      (original: () => string[]) =>
        function (this: unknown): string[] {
          calls.push('otel');
          return original.call(this);
        },
    );
  }
  unpatch(target: Target): void {
    if (isWrapped(target.work)) this._unwrap(target, 'work');
  }
}
interface Target {
  work: () => string[];
}

function target(): Target {
  return { work: () => ['done'] };
}

const lifeline = (t: Target, calls: string[], kind = 'lifeline.test') =>
  wrapMethod<() => string[]>(
    t,
    'work',
    kind,
    (original) =>
      function (this: unknown): string[] {
        calls.push(kind);
        return original.call(this);
      },
  );

describe('wrapMethod beside shimmer', () => {
  it("an instrumentation's second patch, with lifeline's wrapper between, wraps once: one of each", () => {
    const t = target();
    const calls: string[] = [];
    const otel = new Patcher();
    otel.patch(t, calls);
    lifeline(t, calls);
    otel.patch(t, calls); // the package's main file, after the internal file
    expect(t.work()).toEqual(['done']);
    expect(calls).toEqual(['otel', 'lifeline.test']);
  });

  it("disabling the instrumentation takes its wrapper out from under lifeline's; lifeline's undo then restores the original", () => {
    const t = target();
    const original = t.work;
    const calls: string[] = [];
    const otel = new Patcher();
    otel.patch(t, calls);
    const undo = lifeline(t, calls);
    otel.unpatch(t);
    t.work();
    expect(calls).toEqual(['lifeline.test']);
    undo?.();
    expect(t.work).toBe(original);
  });

  it('two lifeline wrappers of different kinds over an instrumentation: the re-patch keeps both, and one of its own', () => {
    const t = target();
    const calls: string[] = [];
    const otel = new Patcher();
    otel.patch(t, calls);
    lifeline(t, calls, 'lifeline.a');
    lifeline(t, calls, 'lifeline.b');
    otel.patch(t, calls);
    t.work();
    expect(calls.filter((c) => c === 'otel')).toHaveLength(1);
    expect(calls.filter((c) => c.startsWith('lifeline.')).sort()).toEqual(['lifeline.a', 'lifeline.b']);
  });

  it('lifeline first, then both patches: one of each', () => {
    const t = target();
    const calls: string[] = [];
    lifeline(t, calls);
    const otel = new Patcher();
    otel.patch(t, calls);
    otel.patch(t, calls);
    t.work();
    expect(calls).toEqual(['otel', 'lifeline.test']);
  });
});
