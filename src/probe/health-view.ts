import type { DiagnosticSnapshot } from '../diagnostics/index.js';
import type { HealthStatus, ProbeKind } from '../health/index.js';

/** What a probe server reads: a {@link HealthCatalog}, or (in the watchdog thread) its published verdicts. */
export interface HealthView {
  /** The verdicts a probe request for `probe` answers with; asked on every request, so a cheap read that never waits. */
  status(probe: ProbeKind): HealthStatus;
  /**
   * The snapshot `GET /debug/diagnostics` serves. A promise when it is built elsewhere: the
   * watchdog thread asks the main thread for it, and fails (the server answers 503) while that
   * thread's event loop is blocked.
   */
  diagnose(): DiagnosticSnapshot | Promise<DiagnosticSnapshot>;
}

/** Thrown by a {@link HealthView} whose main thread does not answer: its event loop is blocked. */
export class EventLoopBlockedError extends Error {
  constructor(blockedMs: number) {
    super(`event loop blocked for ${(blockedMs / 1_000).toFixed(1)} s: no diagnostics until it runs again`);
    this.name = 'EventLoopBlockedError';
  }
}
