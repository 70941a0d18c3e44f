import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CpuCounters, helperStatsIn, ownCpuMs, parseSchedstat } from '../../src/watchdog/cpu-counters.js';

// A process's /proc/<pid>/task laid out in a temporary directory: threads with their comm and schedstat.
const root = mkdtempSync(join(tmpdir(), 'lifeline-tasks-'));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

function tasks(name: string, threads: Record<string, { comm: string; schedstat?: string }>): string {
  const dir = join(root, name);
  for (const [id, { comm, schedstat }] of Object.entries(threads)) {
    mkdirSync(join(dir, id), { recursive: true });
    writeFileSync(join(dir, id, 'comm'), `${comm}\n`);
    if (schedstat !== undefined) writeFileSync(join(dir, id, 'schedstat'), `${schedstat}\n`);
  }
  return dir;
}

describe('the CPU counters of the checks', () => {
  it('parseSchedstat: ns on a CPU and ns waiting for one, in ms', () => {
    expect(parseSchedstat('123456789 2000000 42\n')).toEqual({ cpuMs: 123.456789, waitMs: 2 });
  });

  it("helperStatsIn: the schedstat of V8's platform threads only; none without the directory", () => {
    const dir = tasks('helpers', {
      '100': { comm: 'node' },
      '101': { comm: 'V8Worker' },
      '102': { comm: 'libuv-worker' },
      '103': { comm: 'V8Worker' },
    });
    expect(helperStatsIn(dir).sort()).toEqual([`${dir}/101/schedstat`, `${dir}/103/schedstat`]);
    expect(helperStatsIn(join(root, 'nowhere'))).toEqual([]);
  });

  it("sample: the main thread's counters and each helper's wait; 0 for a helper gone", () => {
    const dir = tasks('sample', {
      '200': { comm: 'node', schedstat: '5000000 1000000 3' },
      '201': { comm: 'V8Worker', schedstat: '1 7000000 1' },
      '202': { comm: 'V8Worker', schedstat: '1 9000000 1' },
    });
    const counters = new CpuCounters(dir, '200');
    const first = counters.sample();
    expect(first.main).toEqual({ cpuMs: 5, waitMs: 1 });
    const helpers = helperStatsIn(dir); // the order the counters keep them in
    expect(first.helperWaits).toEqual(helpers.map((path) => (path.includes('/201/') ? 7 : 9)));
    rmSync(join(dir, '202'), { recursive: true });
    writeFileSync(join(dir, '200', 'schedstat'), '8000000 1500000 4\n');
    const second = counters.sample();
    expect(second.main).toEqual({ cpuMs: 8, waitMs: 1.5 });
    expect(second.helperWaits).toEqual(helpers.map((path) => (path.includes('/201/') ? 7 : 0)));
    expect(second.now).toBeGreaterThanOrEqual(first.now);
  });

  it("a main thread without counters (not Linux) is not read again: this thread's lateness alone tells", () => {
    const dir = tasks('none', { '300': { comm: 'node' } });
    const counters = new CpuCounters(dir, '300');
    expect(counters.sample()).toMatchObject({ main: undefined, helperWaits: [] });
    writeFileSync(join(dir, '300', 'schedstat'), '1000000 0 1\n');
    expect(counters.sample().main).toBeUndefined();
  });

  it("this process's own counters, where the kernel keeps them; this thread's CPU time grows with work", () => {
    const sample = new CpuCounters().sample();
    if (process.platform === 'linux') expect(sample.main?.cpuMs).toBeGreaterThan(0);
    const before = ownCpuMs();
    const until = performance.now() + 30;
    while (performance.now() < until); // burn 30 ms
    expect(ownCpuMs() - before).toBeGreaterThan(10);
  });
});
