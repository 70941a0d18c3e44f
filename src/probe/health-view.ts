import type { DiagnosticSnapshot } from '../diagnostics/index.js';
import type { HealthStatus, ProbeKind } from '../health/index.js';

/** What a probe server reads: a {@link HealthCatalog}, or (in the watchdog thread) its published verdicts. */
export interface HealthView {
  status(probe: ProbeKind): HealthStatus;
  diagnose(): DiagnosticSnapshot | Promise<DiagnosticSnapshot>;
}

/** Thrown by a {@link HealthView} whose main thread does not answer: its event loop is blocked. */
export class EventLoopBlockedError extends Error {
  constructor(blockedMs: number) {
    super(`event loop blocked for ${(blockedMs / 1_000).toFixed(1)} s: no diagnostics until it runs again`);
    this.name = 'EventLoopBlockedError';
  }
}
