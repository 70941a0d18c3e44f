import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readEnvConfig } from '../../src/config/index.js';
import { DeadlinePolicy } from '../../src/policy/index.js';
import { Diagnostics, HealthCatalog, InFlightSpanProcessor, LifelineError, withDeadline, withTimeout } from '../../src/index.js';

const VARIABLES = [
  'LIFELINE_PROBE_PORT',
  'LIFELINE_PROBE_HOST',
  'LIFELINE_HEALTH_INTERVAL_MS',
  'LIFELINE_DEFAULT_TIMEOUT_MS',
  'LIFELINE_DIAGNOSTICS_LOG',
  'LIFELINE_LOG_LEVEL',
];
const value = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.integer().map(String),
  fc.double().map(String),
  fc.constantFrom('', ' 0 ', '1e3', '0x10', '-1', '65536', 'info', 'debug'),
);

/** Calls `fn`; it must either succeed or throw a LifelineError ERR_INVALID_OPTION whose message names `name`. */
function acceptsOrNames(fn: () => unknown, name: string | RegExp): void {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(LifelineError);
    expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION' });
    expect((error as Error).message).toMatch(name);
  }
}

describe('bad input: env and options (every rejection is a clear LifelineError, nothing else)', () => {
  it('readEnvConfig: 3,000 random environments', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom(...VARIABLES), value), (env) => {
        acceptsOrNames(() => readEnvConfig(env), /invalid LIFELINE_[A-Z_]+=/);
      }),
      { numRuns: 3_000 },
    );
  });

  it('constructors and scopes: 2,000 random options', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (a, b) => {
        acceptsOrNames(() => {
          new HealthCatalog({ interval: a as number, maxMissedTicks: b as number }).close();
        }, /invalid (interval|maxMissedTicks)/);
        acceptsOrNames(() => new DeadlinePolicy({ policy: a as [], defaultTimeoutMs: b as number }), /invalid (policy|defaultTimeoutMs)/);
        acceptsOrNames(
          () => new InFlightSpanProcessor({ maxSpans: a as number, captureStacks: b as 'off' }),
          /invalid (maxSpans|captureStacks)/,
        );
        acceptsOrNames(() => new InFlightSpanProcessor({ maxStackBytes: a as number }), /invalid maxStackBytes/);
        acceptsOrNames(() => new Diagnostics({ minIntervalMs: a as number, maxBytes: b as number }), /invalid diagnostics\./);
        acceptsOrNames(() => withTimeout(a as number, () => 0), /invalid timeout/);
        acceptsOrNames(() => withDeadline(b as number, () => 0), /invalid deadline/);
      }),
      { numRuns: 2_000 },
    );
  });

  it('component names: 1,000 random names register or are refused clearly', () => {
    const health = new HealthCatalog();
    try {
      fc.assert(
        fc.property(fc.anything(), (name) => {
          try {
            health.registerReadiness(name as string).deregister();
          } catch (error) {
            expect(error).toBeInstanceOf(LifelineError);
            expect((error as Error).message).toMatch(/name/);
          }
        }),
        { numRuns: 1_000 },
      );
    } finally {
      health.close();
    }
  });
});
