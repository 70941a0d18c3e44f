import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  BlockDetector,
  deniedBetween,
  heartbeatOf,
  longStallMs,
  ownTime,
  stall,
  type BlockStart,
  type Outcome,
} from '../../src/watchdog/block-detector.js';
import type { Sample, Schedule } from '../../src/watchdog/cpu-counters.js';
import { BEAT, BEAT_TIME_OFFSET, HEARTBEAT_BYTES, STARTED } from '../../src/watchdog/messages.js';

// Heartbeat sequences replayed through the detector, with the counters each check would have read.
// Only Date (the epoch times of blocks) and the timers of runnableFor are faked.
const EPOCH = 1_700_000_000_000;
beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(EPOCH);
});
afterEach(() => {
  vi.useRealTimers();
});

/** The main thread's side of the buffer, written as `startHeartbeat` writes it. */
function mainThread() {
  const buffer = new SharedArrayBuffer(HEARTBEAT_BYTES);
  const beats = new Int32Array(buffer, 0, BEAT_TIME_OFFSET / Int32Array.BYTES_PER_ELEMENT);
  const beatTime = new BigInt64Array(buffer, BEAT_TIME_OFFSET, 1);
  return {
    heartbeat: heartbeatOf(buffer),
    /** One beat at `at`, on the watchdog thread's clock. */
    beat(at: number) {
      Atomics.store(beatTime, 0, BigInt(Math.round((performance.timeOrigin + at) * 1_000)));
      Atomics.add(beats, BEAT, 1);
    },
    serving() {
      Atomics.store(beats, STARTED, 1);
    },
  };
}

const sample = (now: number, main?: Schedule, ownCpuMs = 0, helperWaits: number[] = []): Sample => ({ now, ownCpuMs, main, helperWaits });

const THRESHOLD = 100;
const POLL = 25;

function detector(options: { minReportIntervalMs?: number; thresholdMs?: number; pollMs?: number; main?: Schedule } = {}) {
  const main = mainThread();
  const reports: BlockStart[] = [];
  const watch = new BlockDetector(
    {
      thresholdMs: options.thresholdMs ?? THRESHOLD,
      pollMs: options.pollMs ?? POLL,
      minReportIntervalMs: options.minReportIntervalMs ?? 60_000,
    },
    main.heartbeat,
    sample(0, options.main),
    (start) => {
      reports.push(start);
      return start;
    },
  );
  return { watch, main, reports };
}

/** Checks every POLL ms from `from` to `to` (inclusive) with no beat; the outcomes that were not nothing, with when. */
function silentChecks(watch: BlockDetector<BlockStart>, from: number, to: number, main?: (now: number) => Schedule) {
  const found: { at: number; outcome: Outcome<BlockStart> }[] = [];
  for (let now = from; now <= to; now += POLL) {
    const outcome = watch.check(sample(now, main?.(now)));
    if (outcome !== undefined) found.push({ at: now, outcome });
  }
  return found;
}

describe('BlockDetector: what a heartbeat sequence yields', () => {
  it('a loop that beats between every two checks yields nothing', () => {
    const { watch, main } = detector();
    for (let now = POLL; now <= 2_000; now += POLL) {
      main.beat(now - 5);
      expect(watch.check(sample(now))).toBeUndefined();
    }
    expect(watch.block).toBeUndefined();
  });

  it('beats that stop: blocked once a threshold passed since the beat was seen, measured from the beat; ended by the next beat', () => {
    const { watch, main, reports } = detector();
    main.beat(20);
    expect(watch.check(sample(25))).toBeUndefined();
    // Seen at 25: the stall counts from there, 100 ms later it is a block; it began at the beat (20).
    const found = silentChecks(watch, 50, 200);
    expect(found.map(({ at, outcome }) => [at, outcome.type])).toEqual([[125, 'blocked']]);
    const block = watch.block;
    expect(block).toMatchObject({ since: 20, startedAt: EPOCH - 105, startup: true, ownMs: 175, starvedMs: 0 });
    expect(reports).toEqual([{ startedAt: EPOCH - 105, blockedMs: 105, startup: true }]);
    expect(block?.report).toBe(reports[0]);

    main.beat(210);
    expect(watch.check(sample(225))).toEqual({ type: 'ended', block, now: 225 });
    expect(watch.block).toBeUndefined();
    expect(watch.check(sample(250))).toBeUndefined();
  });

  it("the beat's time is kept between the previous check and this one, whatever the other thread's clock says", () => {
    const { watch, main } = detector();
    main.beat(-1_000); // a clock behind: the beat cannot have come before the check that missed it
    watch.check(sample(25));
    silentChecks(watch, 50, 125);
    expect(watch.block?.since).toBe(0);
    main.beat(10_000); // ahead: not after the check that saw it
    watch.check(sample(150));
    silentChecks(watch, 175, 250);
    expect(watch.block?.since).toBe(150);
  });

  it('a process stopped (no check ran, the beat came on resuming) was starved, not blocked', () => {
    const { watch, main } = detector();
    main.beat(20);
    watch.check(sample(25));
    main.beat(540);
    // 500 ms late: every thread of the process was stopped.
    expect(watch.check(sample(550))).toEqual({
      type: 'starved',
      stalledMs: 525,
      starvedMs: 500,
      mainThreadCpuMs: undefined,
      startedAt: EPOCH - 525,
    });
    expect(watch.deniedMs).toBe(500);
  });

  it('starved, and the check ran before the beat: still no block, said once the beat comes', () => {
    const { watch, main } = detector();
    main.beat(20);
    watch.check(sample(25));
    expect(watch.check(sample(550))).toBeUndefined();
    main.beat(560);
    expect(watch.check(sample(575))).toMatchObject({ type: 'starved', stalledMs: 550, starvedMs: 500 });
  });

  it('a stall of a threshold, under it once its starvation is taken off, is said starved only when half a threshold was starved', () => {
    // The main thread ran 75 % (25 %) of the 110 ms and waited for a CPU the rest: 27.5 (82.5) ms starved.
    for (const [share, said] of [
      [0.75, undefined],
      [0.25, { type: 'starved', stalledMs: 110, starvedMs: 82.5, mainThreadCpuMs: 27.5, startedAt: EPOCH - 110 }],
    ] as const) {
      const main = (now: number): Schedule => ({ cpuMs: share * now, waitMs: (1 - share) * now });
      const { watch, main: thread } = detector({ main: main(0) });
      expect(silentChecks(watch, POLL, 100, main)).toEqual([]);
      thread.beat(105);
      expect(watch.check(sample(110, main(110)))).toEqual(said);
    }
  });

  it('a loop that burns CPU while waiting for it (throttled) is blocked once it ran a threshold of its own', () => {
    const main = (now: number): Schedule => ({ cpuMs: now / 5, waitMs: (4 * now) / 5 }); // a fifth of the CPU it wanted
    const { watch } = detector({ main: main(0) });
    const found = silentChecks(watch, POLL, 1_000, main);
    expect(found.map(({ at, outcome }) => [at, outcome.type])).toEqual([[500, 'blocked']]);
    expect(watch.block).toMatchObject({ ownMs: 200, starvedMs: 800 });
  });

  it('a long stall in which the main thread got 2 % of a CPU is all its own; one in which it got none is not a block', () => {
    const threshold = 1_000;
    const poll = 250;
    expect(longStallMs(threshold)).toBe(10_000);
    const share =
      (cpu: number) =>
      (now: number): Schedule => ({ cpuMs: cpu * now, waitMs: (1 - cpu) * now });
    for (const [cpu, blockedAt] of [
      [0.02, 10_000], // its own time alone (2 %) would take 50 s to reach the threshold
      [0, undefined],
    ] as const) {
      const { watch } = detector({ thresholdMs: threshold, pollMs: poll, main: share(cpu)(0) });
      let at: number | undefined;
      for (let now = poll; now <= 20_000 && at === undefined; now += poll)
        if (watch.check(sample(now, share(cpu)(now)))?.type === 'blocked') at = now;
      expect(at, `main thread at ${String(cpu * 100)} %`).toBe(blockedAt);
    }
  });

  it('one block reported per minReportIntervalMs once serving; the others are only counted', () => {
    const { watch, main, reports } = detector({ minReportIntervalMs: 1_000 });
    main.serving();
    let now = 0;
    const blockFrom = (start: number) => {
      main.beat(start);
      watch.check(sample(start + POLL));
      for (now = start + 2 * POLL; watch.block === undefined; now += POLL) watch.check(sample(now));
      const block = watch.block;
      main.beat(now);
      watch.check(sample(now + POLL));
      return block;
    };
    const first = blockFrom(0);
    const second = blockFrom(now + 100);
    const third = blockFrom(1_500);
    expect([first.report, second.report, third.report].map((r) => r !== undefined)).toEqual([true, false, true]);
    expect(reports.map((r) => r.startup)).toEqual([false, false]);
  });

  it("start-up's first block spends none of the budget; a second one during start-up does", () => {
    const blocks = (serveAfter: number) => {
      const { watch, main, reports } = detector({ minReportIntervalMs: 60_000 });
      for (let i = 0; i < 3; i++) {
        if (i === serveAfter) main.serving();
        const start = i * 1_000;
        main.beat(start);
        watch.check(sample(start + POLL));
        let now = start + 2 * POLL;
        for (; watch.block === undefined; now += POLL) watch.check(sample(now));
        main.beat(now);
        watch.check(sample(now + POLL));
      }
      return reports.map((r) => (r.startup ? 'start-up' : 'serving'));
    };
    expect(blocks(1)).toEqual(['start-up', 'serving']);
    expect(blocks(2)).toEqual(['start-up', 'start-up']);
  });
});

describe('the arithmetic of a check', () => {
  it('deniedBetween: the longest of own lateness beyond own CPU, the main thread and a GC helper waiting for a CPU', () => {
    const main = (waitMs: number): Schedule => ({ cpuMs: 0, waitMs });
    expect(deniedBetween(sample(0), sample(25), 25)).toBe(0);
    expect(deniedBetween(sample(0), sample(125), 25)).toBe(100);
    expect(deniedBetween(sample(0, undefined, 0), sample(125, undefined, 60), 25)).toBe(40); // its own work is not lateness
    expect(deniedBetween(sample(0, main(10)), sample(25, main(30)), 25)).toBe(20);
    expect(deniedBetween(sample(0, undefined, 0, [5, 5]), sample(25, undefined, 0, [5, 50]), 25)).toBe(45);
    expect(deniedBetween(sample(0, undefined, 0, [5]), sample(25, undefined, 0, [5, 500]), 25)).toBe(0); // a helper not seen before counts from now
    expect(deniedBetween(sample(0), sample(10), 25)).toBe(0); // early: never negative
  });

  it('stall: starvation is at most the time the main thread was not seen running', () => {
    const mark = { at: 100, deniedMs: 50, main: { cpuMs: 10, waitMs: 0 } };
    expect(stall(mark, 1_100, 1_050, { cpuMs: 10, waitMs: 0 })).toEqual({ wallMs: 1_000, starvedMs: 1_000, mainCpuMs: 0 });
    expect(stall(mark, 1_100, 1_050, { cpuMs: 410, waitMs: 0 })).toEqual({ wallMs: 1_000, starvedMs: 600, mainCpuMs: 400 });
    expect(stall(mark, 1_100, 350, undefined)).toEqual({ wallMs: 1_000, starvedMs: 300, mainCpuMs: undefined });
  });

  it('ownTime: wall less starved, or the whole of a long stall the main thread had at least 1 % of', () => {
    expect(ownTime({ wallMs: 1_000, starvedMs: 700, mainCpuMs: 300 }, 100)).toBe(300);
    expect(ownTime({ wallMs: 10_000, starvedMs: 9_900, mainCpuMs: 100 }, 100)).toBe(10_000);
    expect(ownTime({ wallMs: 10_000, starvedMs: 9_901, mainCpuMs: 99 }, 100)).toBe(99);
    expect(ownTime({ wallMs: 10_000, starvedMs: 9_000, mainCpuMs: undefined }, 100)).toBe(1_000);
    expect(ownTime({ wallMs: 19_999, starvedMs: 19_000, mainCpuMs: 999 }, 5_000)).toBe(999); // long is 4 thresholds past 10 s
  });
});

describe('runnableFor: time the process could have run', () => {
  it('resolves after that much wall time when nothing was denied', async () => {
    const { watch } = detector();
    let done = false;
    void watch.runnableFor(100).then(() => (done = true));
    await vi.advanceTimersByTimeAsync(75);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(25);
    expect(done).toBe(true);
  });

  it('does not count time the checks found denied, and is bounded at ten times as much wall time', async () => {
    const { watch } = detector();
    let doneAt: number | undefined;
    const start = performance.now();
    void watch.runnableFor(100).then(() => (doneAt = performance.now() - start));
    watch.check(sample(575)); // 550 ms denied
    await vi.advanceTimersByTimeAsync(600);
    expect(doneAt).toBeUndefined();
    await vi.advanceTimersByTimeAsync(75);
    expect(doneAt).toBe(650);

    doneAt = undefined;
    const again = performance.now();
    void watch.runnableFor(100).then(() => (doneAt = performance.now() - again));
    for (let now = 1_000; now <= 3_000; now += 100) watch.check(sample(now)); // starved throughout
    await vi.advanceTimersByTimeAsync(2_000);
    expect(doneAt).toBe(1_000);
  });
});
