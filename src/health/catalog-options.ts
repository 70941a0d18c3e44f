// What a catalog is given and what it answers: its options and a probe's status. The catalog
// itself is in catalog.ts.
import type { TracerProvider } from '@opentelemetry/api';
import type { DiagnosticsOptions, HealthDiagnostics } from '../diagnostics/index.js';
import type { Logger } from '../log/index.js';

/** Options of a catalog ({@link HealthCatalog}). */
export interface HealthCatalogOptions {
  /** Ms between ping rounds. Default 15 000. */
  interval?: number;
  /**
   * Ticks a component may leave untaken and stay healthy; offered one more, it is unhealthy. Each
   * tick's deadline is `interval × maxMissedTicks`, so work cut at its deadline is back before the
   * verdict. Default 2.
   */
  maxMissedTicks?: number;
  /**
   * The old name of {@link HealthCatalogOptions.maxMissedTicks}.
   * @deprecated Renamed {@link HealthCatalogOptions.maxMissedTicks}; `buffer` is read when that is not given.
   */
  buffer?: number;
  /** Where tick spans go. Default: the global tracer provider. */
  tracerProvider?: TracerProvider;
  /**
   * How unhealthy verdicts explain themselves: options of the built-in `Diagnostics`
   * (give it an `InFlightSpanProcessor` for span trees), or your own implementation. The catalog
   * closes diagnostics it made from options; an object you give is yours to close.
   */
  diagnostics?: DiagnosticsOptions | HealthDiagnostics;
  /** Where the catalog says what failed (and, unless `diagnostics` names another, its verdicts). Default: lifeline's pino logger. */
  logger?: Logger;
}

/** Options of one registration. */
export interface RegisterOptions {
  /** Healthy once means healthy forever: stop pinging after the first healthy round. */
  once?: boolean;
}

/** The verdicts for one probe. Names are sorted; `ok` iff `unhealthy` is empty. */
export interface HealthStatus {
  /** Whether the probe passes: nothing is unhealthy. */
  readonly ok: boolean;
  /** The healthy components (with the catalog's own `healthcheck`), sorted. */
  readonly healthy: readonly string[];
  /** The unhealthy ones, sorted: `healthcheck` when rounds stalled, `shutdown` while draining (readiness). */
  readonly unhealthy: readonly string[];
  /**
   * Set by the watchdog thread while the event loop is blocked past its threshold (the catalog's
   * own `healthcheck` is then unhealthy): for how long, and where, when the stack was captured.
   */
  readonly eventLoop?: EventLoopStatus;
}

/** A blocked event loop, as a probe answer shows it. */
export interface EventLoopStatus {
  /** How long the loop has not run, so far. */
  readonly blockedMs: number;
  /** `crunchReport (/app/report.js:8)`, when the stack was captured. */
  readonly blockedIn?: string;
  /** The innermost frames, as `fn (file:line:column)`. */
  readonly frames?: readonly string[];
}
