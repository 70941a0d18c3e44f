/**
 * The blocked-loop detector: it reads the main thread's heartbeat (a counter in shared memory the
 * main thread bumps on a timer) at each check of the watchdog thread, with the CPU counters of that
 * moment, and says when the loop is blocked, when a block ended, and when a stall was only the
 * process starved of CPU (stopped, throttled), which is not a block: see `stall`.
 *
 * Nothing here reads a clock or starts a timer but `runnableFor`: the thread's entry hands each
 * check its sample, so a heartbeat sequence can be replayed.
 */
import type { Sample, Schedule } from './cpu-counters.js';
import { BEAT, BEAT_TIME_OFFSET, INSPECTOR_OPEN, STARTED, type StarvedMessage } from './messages.js';
import type { BlockedFrame } from './frames.js';

/** The heartbeat buffer, as the watchdog thread reads it. */
export interface Heartbeat {
  /** The counter the main thread bumps at each beat. */
  readonly count: () => number;
  /** When the main thread beat last, on this thread's `performance.now()` clock. */
  readonly lastBeatAt: () => number;
  /** The app is serving: a block now is no longer start-up's. */
  readonly started: () => boolean;
  /** An inspector server is open on the main thread: a stop may be a developer's breakpoint. */
  readonly inspectorOpen: () => boolean;
}

export function heartbeatOf(buffer: SharedArrayBuffer): Heartbeat {
  const beats = new Int32Array(buffer, 0, BEAT_TIME_OFFSET / Int32Array.BYTES_PER_ELEMENT);
  const beatTime = new BigInt64Array(buffer, BEAT_TIME_OFFSET, 1);
  return {
    count: () => Atomics.load(beats, BEAT),
    // Epoch µs on the main thread: an epoch clock is what both threads share.
    lastBeatAt: () => Number(Atomics.load(beatTime, 0)) / 1_000 - performance.timeOrigin,
    started: () => Atomics.load(beats, STARTED) !== 0,
    inspectorOpen: () => Atomics.load(beats, INSPECTOR_OPEN) === 1,
  };
}

export interface DetectorOptions {
  readonly thresholdMs: number;
  /** The period of the checks (and of the heartbeat). */
  readonly pollMs: number;
  readonly minReportIntervalMs: number;
}

/** A block as it is detected: what its report is started with. */
export interface BlockStart {
  /** Epoch ms it began. */
  readonly startedAt: number;
  /** How long it lasted when detected, ms. */
  readonly blockedMs: number;
  readonly startup: boolean;
}

/** A block in progress. `R` is what its report is (the detector only hands it back). */
export interface Block<R = unknown> {
  /** Monotonic ms (this thread's clock) of the last heartbeat: where the block began. */
  readonly since: number;
  /** Epoch ms of the same instant. */
  readonly startedAt: number;
  /** Its report, when the rate limit let it be reported. */
  readonly report: R | undefined;
  /** Began before the app was serving: reported without spending the budget. */
  readonly startup: boolean;
  /** The frames, once captured: what probe answers show. */
  frames?: readonly BlockedFrame[] | undefined;
  /** How much of it, so far, the process was starved of CPU: not the loop's doing, no probe fails for it. */
  starvedMs: number;
  /**
   * The loop's own time in it at the last check: what fails probes. Read between checks as
   * wall time less the starvation counted so far, it would grow with starved time, then fall
   * back at the next check: probes would flap 503, 200, 503.
   */
  ownMs: number;
}

/** What a check found, when it found something. */
export type Outcome<R> =
  | { readonly type: 'blocked'; readonly block: Block<R> }
  | { readonly type: 'ended'; readonly block: Block<R>; readonly now: number }
  | StarvedMessage;

/** The counters at the last heartbeat seen: a stall is measured from there. */
export interface Mark {
  /** This thread's clock when it saw that beat. */
  readonly at: number;
  readonly deniedMs: number;
  readonly main: Schedule | undefined;
}

export interface Stall {
  readonly wallMs: number;
  readonly starvedMs: number;
  /** CPU the main thread got in it (Linux); undefined elsewhere. */
  readonly mainCpuMs: number | undefined;
}

/**
 * Ms the process could not run between two checks: the longest of this thread's own lateness
 * beyond its own work (all of a stopped process, SIGSTOP or a paused VM, or one throttled at its
 * CPU limit, is late), the main thread's wait for a CPU (the kernel counts it) and that of a GC
 * helper the main thread may be waiting for.
 */
export function deniedBetween(previous: Sample, current: Sample, pollMs: number): number {
  const late = current.now - previous.now - pollMs - (current.ownCpuMs - previous.ownCpuMs);
  const mainWait = current.main === undefined || previous.main === undefined ? 0 : current.main.waitMs - previous.main.waitMs;
  const helperWait = Math.max(0, ...current.helperWaits.map((wait, i) => wait - (previous.helperWaits[i] ?? wait)));
  return Math.max(0, late, mainWait, helperWait);
}

/**
 * How long the loop has not run, and how much of that the process was starved of CPU. A blocked
 * loop holds the main thread: it runs (a loop), or waits in a system call (`execSync`, sync I/O,
 * `Atomics.wait`) while this thread keeps its time; either is the loop's own time. Starved is
 * what was denied it, never more than the time the main thread was not seen running: a loop that
 * burned a threshold of CPU is blocked, however slowly it got it.
 */
export function stall(mark: Mark, now: number, deniedMs: number, main: Schedule | undefined): Stall {
  const wallMs = now - mark.at;
  const mainCpuMs = main === undefined || mark.main === undefined ? undefined : main.cpuMs - mark.main.cpuMs;
  return { wallMs, starvedMs: Math.max(0, Math.min(wallMs - (mainCpuMs ?? 0), deniedMs - mark.deniedMs)), mainCpuMs };
}

/**
 * Past this much wall time, a stall in which the main thread got a real share of the CPU it could
 * have had is a block whatever the share: a loop stuck in a pod throttled at 100m gets a tenth of a
 * core, and counting only its own CPU time would take ten thresholds to see it, and ten times the
 * stall limit to fail its probes. A stopped or paused process gets no share at all: still starved.
 */
export function longStallMs(thresholdMs: number): number {
  return Math.max(4 * thresholdMs, 10_000);
}
/** The least share of the stall's wall time the main thread must have run for a long stall to be its own. */
const LONG_STALL_SHARE = 0.01;

/** The loop's own time in a stall: its time less what it was starved of, or all of a long stall it ran in. */
export function ownTime({ wallMs, starvedMs, mainCpuMs }: Stall, thresholdMs: number): number {
  if (wallMs >= longStallMs(thresholdMs) && mainCpuMs !== undefined && mainCpuMs >= LONG_STALL_SHARE * wallMs) return wallMs;
  return wallMs - starvedMs;
}

/** Watches the heartbeat, one check at a time. */
export class BlockDetector<R> {
  readonly #options: DetectorOptions;
  readonly #heartbeat: Heartbeat;
  /** Starts the report of a block the rate limit lets through (capture, export): called as it is detected. */
  readonly #report: (start: BlockStart) => R;
  #seen: number;
  /** When the main thread beat last, on this thread's clock: a starved check sees a beat late. */
  #beatAt: number;
  #block: Block<R> | undefined;
  #lastReport = Number.NEGATIVE_INFINITY;
  /** Start-up's block was reported: a second one during start-up spends the budget. */
  #startupReported = false;
  /**
   * Ms the process could not run, summed over the checks (see `deniedBetween`). Never more than
   * the time the main thread was not seen running: see `stall`.
   */
  #deniedMs = 0;
  #last: Sample;
  #mark: Mark;

  /** `first`: the counters as the thread starts, which the first check is measured from. */
  constructor(options: DetectorOptions, heartbeat: Heartbeat, first: Sample, report: (start: BlockStart) => R) {
    this.#options = options;
    this.#heartbeat = heartbeat;
    this.#report = report;
    this.#seen = heartbeat.count();
    this.#beatAt = first.now;
    this.#last = first;
    this.#mark = { at: first.now, deniedMs: 0, main: first.main };
  }

  /** The block in progress, if any. */
  get block(): Block<R> | undefined {
    return this.#block;
  }

  /** Ms the process could not run so far. */
  get deniedMs(): number {
    return this.#deniedMs;
  }

  check(sample: Sample): Outcome<R> | undefined {
    const { thresholdMs, minReportIntervalMs } = this.#options;
    const { now, main } = sample;
    this.#deniedMs += deniedBetween(this.#last, sample, this.#options.pollMs);
    const previousCheck = this.#last.now;
    this.#last = sample;
    const current = this.#heartbeat.count();
    const counted = stall(this.#mark, now, this.#deniedMs, main);
    const { wallMs, starvedMs, mainCpuMs } = counted;
    const ownMs = ownTime(counted, thresholdMs);
    const block = this.#block;
    if (block !== undefined) {
      block.starvedMs = starvedMs;
      block.ownMs = ownMs;
    }
    if (current !== this.#seen) {
      this.#seen = current;
      this.#block = undefined;
      // The beat came after the previous check (that one saw the old count): a clock that differs
      // between the threads cannot put it outside.
      this.#beatAt = Math.min(now, Math.max(previousCheck, this.#heartbeat.lastBeatAt()));
      this.#mark = { at: now, deniedMs: this.#deniedMs, main };
      if (block !== undefined) return { type: 'ended', block, now };
      // The loop did not run for a threshold, but only because the process got no CPU: said, not blamed.
      // A stall just short of the threshold with a few ms starved is neither: nothing to say.
      if (wallMs >= thresholdMs && ownMs < thresholdMs && starvedMs >= thresholdMs / 2)
        return { type: 'starved', stalledMs: wallMs, starvedMs, mainThreadCpuMs: mainCpuMs, startedAt: Date.now() - wallMs };
      return undefined;
    }
    // Blocked once the loop's own time in the stall reaches the threshold: starved time does not count.
    if (block !== undefined || ownMs < thresholdMs) return undefined;
    const startup = !this.#heartbeat.started();
    // Start-up (module loading) has a report of its own: a slow start must not hide the first real block.
    const startupReport = startup && !this.#startupReported;
    const reported = startupReport || now - this.#lastReport >= minReportIntervalMs;
    if (startupReport) this.#startupReported = true;
    else if (reported) this.#lastReport = now;
    // Measured from the beat: the app's own clock around the block agrees.
    const blockedMs = now - this.#beatAt;
    const startedAt = Date.now() - blockedMs;
    this.#block = {
      since: this.#beatAt,
      startedAt,
      startup,
      starvedMs,
      ownMs,
      report: reported ? this.#report({ startedAt, blockedMs, startup }) : undefined,
    };
    return { type: 'blocked', block: this.#block };
  }

  /**
   * Resolves once the process could have run for `ms`: time it was denied CPU (counted by the
   * checks) does not count, so a loaded machine that hands the main thread a tenth of a core gets
   * as long to pause it as an idle one. At most ten times `ms` of wall time: bounded however starved.
   */
  runnableFor(ms: number): Promise<void> {
    const start = performance.now();
    const denied = this.#deniedMs;
    return new Promise((resolve) => {
      const poll = setInterval(
        () => {
          const wallMs = performance.now() - start;
          if (wallMs - (this.#deniedMs - denied) < ms && wallMs < 10 * ms) return;
          clearInterval(poll);
          resolve();
        },
        Math.min(ms, this.#options.pollMs),
      );
    });
  }
}
