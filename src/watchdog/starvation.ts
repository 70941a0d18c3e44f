/**
 * CPU starvation the watchdog saw in this process: stalls of the event loop of at least its
 * threshold that were the process getting no CPU (stopped, a paused VM, throttled at its CPU
 * limit, an oversubscribed machine), not the loop's own doing. Read by the health metrics.
 */
let stalledMs = 0;
let stalls = 0;

/** Counts one stall the process was starved through. */
export function recordStarvation(ms: number): void {
  stalledMs += ms;
  stalls++;
}

/** The stalls counted so far, and their time in all. */
export function cpuStarvation(): { readonly seconds: number; readonly stalls: number } {
  return { seconds: stalledMs / 1_000, stalls };
}
