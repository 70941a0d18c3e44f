import { afterEach, describe, expect, it, vi } from 'vitest';
import { HealthCatalog, type HealthDiagnostics, type Logger } from '../../src/index.js';
import { logSwallowed } from '../../src/log/index.js';

function recording(): { logger: Logger; lines: { level: string; obj: object; msg: string }[] } {
  const lines: { level: string; obj: object; msg: string }[] = [];
  return {
    lines,
    logger: {
      warn: (obj, msg) => lines.push({ level: 'warn', obj, msg }),
      info: (obj, msg) => lines.push({ level: 'info', obj, msg }),
      debug: (obj, msg) => lines.push({ level: 'debug', obj, msg }),
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('a failure lifeline catches so the app goes on is said once, at WARN', () => {
  it('says what failed and the message (never an object), then at most once a minute per what', () => {
    vi.useFakeTimers();
    const { logger, lines } = recording();
    logSwallowed(logger, 'closing the probe server', new Error('EADDRINUSE'), { port: 5555 });
    logSwallowed(logger, 'closing the probe server', new Error('again'));
    logSwallowed(logger, 'stopping the watchdog', { secret: 'x' });
    expect(lines).toEqual([
      { level: 'warn', obj: { port: 5555, err: 'EADDRINUSE' }, msg: 'lifeline: closing the probe server failed' },
      { level: 'warn', obj: { err: 'object' }, msg: 'lifeline: stopping the watchdog failed' },
    ]);
    vi.advanceTimersByTime(60_000);
    logSwallowed(logger, 'closing the probe server', new Error('later'));
    expect(lines.at(-1)).toEqual({ level: 'warn', obj: { err: 'later' }, msg: 'lifeline: closing the probe server failed' });
  });

  it('a catalog says, through its own logger, that explaining a verdict failed, and its rounds go on', () => {
    const { logger, lines } = recording();
    const failing: HealthDiagnostics = {
      onRound: () => {
        throw new Error('exporter exploded');
      },
      snapshot: () => {
        throw new Error('unused');
      },
    };
    const health = new HealthCatalog({ interval: 60_000, diagnostics: failing, logger });
    try {
      health.registerLiveness('poller');
      health.runRound();
      health.runRound();
      expect(lines).toEqual([{ level: 'warn', obj: { err: 'exporter exploded' }, msg: 'lifeline: explaining a verdict failed' }]);
      expect(health.status('live').unhealthy).toEqual(['poller']);
    } finally {
      health.close();
    }
  });
});
