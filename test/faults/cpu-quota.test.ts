import { existsSync, mkdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT } from '../support/node.js';
import { otlpReceiver } from '../support/otlp-receiver.js';
import { startService } from '../support/service.js';

// A real CFS quota (a cgroup, as a pod's CPU limit is): the kernel counts the time a throttled
// process waits as run-queue wait, the same figure that tells the watchdog a process was starved.
const FIXTURE = join(ROOT, 'test/fixtures/starved-app.mjs');
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** A cgroup limiting its processes to `share` of one core (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us`). */
function cpuQuota(share: number): { add(pid: number): void; remove(): void } {
  const name = `lifeline-quota-${String(process.pid)}`;
  const period = 100_000;
  const quota = String(Math.round(share * period));
  const v1 = '/sys/fs/cgroup/cpu';
  if (existsSync(join(v1, 'cpu.cfs_quota_us')) || existsSync(join(v1, 'tasks'))) {
    const dir = join(v1, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'cpu.cfs_period_us'), String(period));
    writeFileSync(join(dir, 'cpu.cfs_quota_us'), quota);
    return {
      add: (pid) => {
        writeFileSync(join(dir, 'cgroup.procs'), String(pid));
      },
      remove: () => {
        rmdirSync(dir);
      },
    };
  }
  const dir = join('/sys/fs/cgroup', name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'cpu.max'), `${quota} ${String(period)}`);
  return {
    add: (pid) => {
      writeFileSync(join(dir, 'cgroup.procs'), String(pid));
    },
    remove: () => {
      rmdirSync(dir);
    },
  };
}

describe('a pod throttled at its CPU limit (a real CFS quota)', { timeout: 120_000 }, () => {
  it('a loop stuck at a tenth of a core is reported once its stall is long, not after ten thresholds of its own CPU', async () => {
    const receiver = await otlpReceiver(0);
    cleanup.push(() => receiver.close());
    // Made first, removed last: a cgroup with a process in it cannot be removed.
    const quota = cpuQuota(0.1);
    cleanup.push(() => {
      quota.remove();
    });
    // Threshold 3 s: counting only the loop's own CPU, a tenth of a core reports it after ~30 s;
    // a long stall in which it ran at all (the longer of 4 thresholds and 10 s: 12 s) is its own.
    const app = await startService(FIXTURE, {
      OTEL_SERVICE_NAME: 'quota',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      LIFELINE_LOG_LEVEL: 'warn',
      THRESHOLD_MS: '3000',
      INTERVAL_MS: '1000',
      REPORT_INTERVAL_MS: '0',
    });
    cleanup.push(() => app.kill('SIGKILL'));
    quota.add(Number(app.first.pid));
    fetch(`${app.url}/block?ms=100000`).catch(() => undefined); // stuck: far more CPU than the test lasts
    const started = Date.now();
    const blocks = await receiver.waitFor(
      () => receiver.spans.some((s) => s.name === 'event loop blocked' && s.attributes['lifeline.event_loop.ongoing'] === true),
      60_000,
    );
    const after = Date.now() - started;
    const block = blocks.find((s) => s.name === 'event loop blocked');
    console.log(`CFS quota 10 % of a core: a stuck loop reported after ${String(after)} ms`);
    expect(block?.attributes['code.function.name']).toBe('crunchReport');
    // Measured: 17 s (the stall's 12 s, then a capture and an export at a tenth of a core); 34 s without the rule.
    expect(after).toBeLessThan(26_000);
  });
});
