/**
 * A deadline carries two readings, as Go's `time.Time` does: epoch ms (`at`) to show, record on
 * spans and errors; and a monotonic one to measure what is left of it. The wall clock can be
 * stepped (NTP, an operator, a VM resumed) and a deadline measured on it ends late or early by the
 * whole step; `performance.now()` only moves forward, at the rate of real time. Everything that
 * waits, compares or sends a remaining budget uses the monotonic reading.
 */

/** Monotonic ms: only differences between two readings mean anything. */
export function monotonicNow(): number {
  // The global, looked up per call, so fake clocks in tests can replace it.
  return performance.now();
}

/**
 * The monotonic reading of the epoch instant `at`, by the two clocks as they stand now. Called
 * once, when a deadline given as a wall time is made (Go's `time.Until` when a timer is set): from
 * then on a step of the wall clock no longer moves it.
 */
export function monotonicOf(at: number): number {
  return monotonicNow() + (at - Date.now());
}

/** The epoch instant of the monotonic reading `monotonicAt`, by the clocks now: for an API that only takes a wall time. */
export function epochOf(monotonicAt: number): number {
  return Date.now() + (monotonicAt - monotonicNow());
}
