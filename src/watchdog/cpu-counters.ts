/**
 * The CPU counters the watchdog thread reads at each check: its own CPU time, and (Linux) how long
 * the main thread and V8's helper threads ran and waited for a CPU. They tell a loop that did not
 * run because it was busy from one that did not run because the process got no CPU.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** A thread's scheduler counters (Linux `schedstat`): ms on a CPU, and ms runnable but waiting for one. */
export interface Schedule {
  readonly cpuMs: number;
  readonly waitMs: number;
}

/** The counters as one check reads them. */
export interface Sample {
  /** This thread's monotonic clock, ms. */
  readonly now: number;
  /** CPU this thread used so far, ms. */
  readonly ownCpuMs: number;
  /** The main thread's counters; undefined where the kernel keeps none. */
  readonly main: Schedule | undefined;
  /** Each V8 helper thread's wait for a CPU so far, ms (0 for one gone), in the order they were found. */
  readonly helperWaits: readonly number[];
}

/** `schedstat`'s text: ns on a CPU, ns waiting for one, timeslices. */
export function parseSchedstat(text: string): Schedule {
  const [cpu, wait] = text.split(' ');
  return { cpuMs: Number(cpu) / 1e6, waitMs: Number(wait) / 1e6 };
}

function schedule(path: string): Schedule {
  return parseSchedstat(readFileSync(path, 'latin1'));
}

/**
 * The schedstat files of V8's platform threads in `tasks` (a process's `/proc/<pid>/task`), which a
 * garbage collection on the main thread hands work to and waits for: while they wait for a CPU, so
 * does the main thread's collection, asleep (not in the run queue itself). None where there is no
 * such directory.
 */
export function helperStatsIn(tasks: string): string[] {
  try {
    return readdirSync(tasks)
      .filter((task) => readFileSync(`${tasks}/${task}/comm`, 'latin1').trim() === 'V8Worker')
      .map((task) => `${tasks}/${task}/schedstat`);
  } catch {
    return [];
  }
}

/** CPU this thread used, in ms (Node 23.9+; 0 before, when its own lateness counts whole). */
export function ownCpuMs(): number {
  const usage = typeof process.threadCpuUsage === 'function' ? process.threadCpuUsage() : undefined;
  return usage === undefined ? 0 : (usage.user + usage.system) / 1_000;
}

/** Reads the counters of one process's threads; by default this process's. */
export class CpuCounters {
  readonly #main: string;
  /** Found once: Node starts its helper threads with the process. */
  readonly #helpers: readonly string[];
  /** Cleared once the main thread's counters cannot be read: they will not be readable later either. */
  #schedstat = true;

  constructor(tasks = `/proc/${String(process.pid)}/task`, mainTask = String(process.pid)) {
    this.#main = `${tasks}/${mainTask}/schedstat`;
    this.#helpers = helperStatsIn(tasks);
  }

  /** Read in this order: the clock first, then what the threads got up to it. */
  sample(): Sample {
    return { now: performance.now(), ownCpuMs: ownCpuMs(), main: this.#mainThread(), helperWaits: this.#helperWaits() };
  }

  #mainThread(): Schedule | undefined {
    if (!this.#schedstat) return undefined;
    try {
      return schedule(this.#main);
    } catch {
      this.#schedstat = false; // not Linux, or a kernel without scheduler statistics: this thread's lateness alone tells
      return undefined;
    }
  }

  #helperWaits(): number[] {
    return this.#helpers.map((path) => {
      try {
        return schedule(path).waitMs;
      } catch {
        return 0;
      }
    });
  }
}
