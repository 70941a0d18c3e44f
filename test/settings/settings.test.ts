import { describe, expect, it } from 'vitest';
import { readEnvConfig } from '../../src/config/index.js';
import { expectation } from '../../src/errors/index.js';
import { Diagnostics, HealthCatalog, startProbeServer, startWatchdog } from '../../src/index.js';
import { DeadlinePolicy } from '../../src/policy/index.js';
import { SETTINGS, settingFromEnv, settingOption, type NumberSetting } from '../../src/settings/index.js';

const settings = Object.entries(SETTINGS) as [string, NumberSetting][];

/** Values around each edge of a setting's range, as a user might write them. */
function candidates(setting: NumberSetting): number[] {
  const { min, max = Number.MAX_SAFE_INTEGER } = setting;
  return [0, 1, 1.5, min - 1, min, min + 0.5, min + 1, 10, 1_000, max - 1, max, max + 1, max + 0.5].filter((n) => n >= 0);
}

const accepts = (check: () => unknown): boolean => {
  try {
    check();
    return true;
  } catch {
    return false;
  }
};

describe('each numeric setting has one rule, for its option and its variable alike', () => {
  it.each(settings)('%s: the option and the variable accept the same values', (_name, setting) => {
    for (const value of candidates(setting)) {
      const text = Number.isInteger(value) ? String(value) : value.toFixed(1);
      expect(
        accepts(() => settingFromEnv(setting, text)),
        `${setting.env}=${text}`,
      ).toBe(accepts(() => settingOption(setting, value)));
    }
  });

  it.each(settings)('%s: both errors say the same expectation, each naming what the user wrote', (_name, setting) => {
    const bad = (setting.max ?? 0) + 1;
    expect(() => settingOption(setting, bad)).toThrow(`invalid ${setting.option}: ${String(bad)} (expected ${expectation(setting)})`);
    expect(() => readEnvConfig({ [setting.env]: String(bad) })).toThrow(
      `invalid ${setting.env}="${String(bad)}" (expected ${expectation(setting)})`,
    );
    expect(() => readEnvConfig({ [setting.env]: '1e3' })).toThrow(setting.env);
  });

  it('the features check their options by the same rules', async () => {
    const said = (setting: NumberSetting) => `(expected ${expectation(setting)})`;
    expect(() => new HealthCatalog({ interval: 0 })).toThrow(said(SETTINGS.healthInterval));
    expect(() => new DeadlinePolicy({ defaultTimeoutMs: 0 })).toThrow(said(SETTINGS.defaultTimeout));
    expect(() => new DeadlinePolicy({ headersTimeoutMs: -1 })).toThrow(said(SETTINGS.headersTimeout));
    expect(() => new Diagnostics({ stuckAfterMs: 0 })).toThrow(said(SETTINGS.stuckAfter));
    expect(() => startWatchdog({ thresholdMs: 5, exportSpans: false })).toThrow(said(SETTINGS.watchdogThreshold));
    const health = new HealthCatalog();
    await expect(startProbeServer({ health, port: 0, maxConnections: 0 })).rejects.toThrow(said(SETTINGS.probeMaxConnections));
    await expect(startProbeServer({ health, port: 0, maxRequestsPerSecond: 0 })).rejects.toThrow(said(SETTINGS.probeMaxRequestsPerSecond));
    health.close();
  });

  it('a value the option took but the variable refused before is taken by both (the bounds were two)', () => {
    // A day was the variables' bound; the options took up to Node's longest timer.
    expect(readEnvConfig({ LIFELINE_STUCK_AFTER_MS: '172800000' }).stuckAfterMs).toBe(172_800_000);
    expect(readEnvConfig({ LIFELINE_HEALTH_INTERVAL_MS: '172800000' }).healthIntervalMs).toBe(172_800_000);
    expect(readEnvConfig({ LIFELINE_PROBE_MAX_REQUESTS_PER_SECOND: '0.5' }).probeLimits.maxRequestsPerSecond).toBe(0.5);
  });
});
