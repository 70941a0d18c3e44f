import { context as apiContext, trace, type TracerProvider } from '@opentelemetry/api';
import { numberOption, oneOf } from '../errors/index.js';
import { defaultLogger, logSwallowed, type Logger } from '../log/index.js';
import { Redactor } from '../redaction/index.js';
import { scopeTracer } from '../semconv/index.js';
import { SETTINGS, settingOption } from '../settings/index.js';
import type { InFlightSpanProcessor } from './in-flight-span-processor.js';
import { ProcessView } from './process-view.js';
import type { SnapshotIdGenerator } from './snapshot-ids.js';
import { SnapshotSpans } from './snapshot-spans.js';
import { componentSnapshot } from './snapshot-tree.js';
import { StuckWork } from './stuck-work.js';
import type { BlockedLoop, DiagnosedComponent, DiagnosticSnapshot, HealthDiagnostics } from './types.js';
import { logVerdict } from './verdict-log.js';
import { VerdictSpans } from './verdict-spans.js';

// The public face of diagnostics: when a verdict or a stuck-work round is due, and the options.
// What they show and how it is exported lives beside it: snapshot-tree (the in-flight trees),
// snapshot-spans (the `(in flight)` spans), verdict-spans and verdict-log (a verdict's spans and
// log lines), stuck-work (work exported with no verdict), describe (the text a person reads).

/** Options of {@link Diagnostics}. */
export interface DiagnosticsOptions {
  /** The tracker of in-flight spans; without one a diagnostic has the process view only. */
  inFlight?: InFlightSpanProcessor;
  /** Where `health verdict` and `(in flight)` spans go. Default: the global tracer provider. */
  tracerProvider?: TracerProvider;
  /** Default: lifeline's pino logger. */
  logger?: Logger;
  /** While components stay unhealthy, re-emit at most this often. Default 60 000. */
  minIntervalMs?: number;
  /** Cap of each diagnostic attribute, in bytes. Default 16 384. */
  maxBytes?: number;
  /** Level of the dump in the log: `'debug'` (default) or `'info'`. Names are always at INFO. */
  log?: 'debug' | 'info';
  /**
   * The provider's ID generator, when it is lifeline's: a stuck tick's snapshot is then the root of
   * the tick's own trace, else a trace of its own.
   */
  ids?: SnapshotIdGenerator;
  /**
   * When a request or call with no deadline counts as stuck (see {@link Diagnostics.exportStuck}):
   * in flight this long. Default 10 000: under the 30 s a Kubernetes liveness probe takes to restart
   * a pod with its defaults (10 s period × 3 failures), so what it was doing is exported before the
   * restart, and far above what a request to a healthy service takes. Work past its deadline is
   * stuck at once.
   */
  stuckAfterMs?: number;
}

/** What one {@link Diagnostics.exportStuck} round found and did. */
export interface StuckRound {
  /** Stuck spans in flight whose parent is not itself stuck (each heads a stuck subtree). */
  readonly stuck: number;
  /** Snapshot trees exported this round. */
  readonly exported: number;
  /** Stuck spans left out this round by the caps (counted in a summary span instead). */
  readonly capped: number;
}

/**
 * Explains unhealthy verdicts: on each healthy→unhealthy transition (and at most every
 * `minIntervalMs` while components stay unhealthy) a `health verdict: <components>` span with the
 * `lifeline.diagnostic` event and a `<component> unhealthy` child per component, `(in flight)`
 * snapshot spans in the stuck traces, and log lines.
 */
export class Diagnostics implements HealthDiagnostics {
  readonly #inFlight: InFlightSpanProcessor | undefined;
  readonly #logger: Logger | undefined;
  readonly #minIntervalMs: number;
  readonly #log: 'debug' | 'info';
  readonly #redactor: Redactor;
  readonly #process = new ProcessView();
  readonly #verdicts: VerdictSpans;
  readonly #stuck: StuckWork;
  #lastEmit: number | undefined;
  #lastBlockEmit: number | undefined;
  #stuckTimer: NodeJS.Timeout | undefined;

  constructor(options: DiagnosticsOptions = {}) {
    const {
      inFlight,
      tracerProvider,
      logger,
      minIntervalMs = 60_000,
      maxBytes = 16_384,
      log = 'debug',
      ids,
      stuckAfterMs = 10_000,
    } = options;
    numberOption('diagnostics.minIntervalMs', minIntervalMs, { min: 0, unit: 'ms' });
    settingOption(SETTINGS.stuckAfter, stuckAfterMs);
    numberOption('diagnostics.maxBytes', maxBytes, { min: 256, integer: true });
    this.#inFlight = inFlight;
    const tracer = scopeTracer(tracerProvider);
    this.#logger = logger;
    this.#minIntervalMs = minIntervalMs;
    this.#log = oneOf('diagnostics.log', log, ['debug', 'info']);
    this.#redactor = inFlight?.redactor ?? new Redactor();
    // One set of snapshot spans for verdicts and stuck work: a span either exported is not exported again by the other.
    const snapshots = new SnapshotSpans(tracer, inFlight, this.#redactor, ids);
    this.#verdicts = new VerdictSpans(tracer, snapshots, this.#redactor, maxBytes);
    this.#stuck = new StuckWork(inFlight, snapshots, tracer, this.#redactor, { minIntervalMs, stuckAfterMs, maxBytes });
  }

  /**
   * What the catalog calls after each ping round. Emits a verdict (its spans and log lines) when a
   * component turned unhealthy in the round, and again at most every `minIntervalMs` while any
   * stays unhealthy; otherwise it emits nothing.
   * @param turned - the components this round turned from healthy to unhealthy.
   * @param anyUnhealthy - whether any component is unhealthy after the round (`turned` ones included).
   * @param unhealthy - lists every unhealthy component, sorted by name, from the catalog. Called only
   * when a verdict is emitted: rounds run every interval and mostly have nothing to explain, and the
   * list is built by walking every component.
   */
  onRound(turned: readonly DiagnosedComponent[], anyUnhealthy: boolean, unhealthy: () => readonly DiagnosedComponent[]): void {
    this.#process.start();
    if (!anyUnhealthy) {
      this.#lastEmit = undefined;
      return;
    }
    const now = Date.now();
    const due = turned.length > 0 || (this.#lastEmit !== undefined && now - this.#lastEmit >= this.#minIntervalMs);
    if (!due) return;
    this.#lastEmit = now;
    this.#emit(this.snapshot(unhealthy()));
    this.#process.resetDelay();
  }

  /**
   * @internal The event loop was blocked past the catalog's own limit: meanwhile the watchdog thread answered
   * probes 503 and no round could record a verdict. Records it now that the loop runs again — a
   * `health verdict` for `snapshot().unhealthy` (which names the catalog's `healthcheck`; built only when emitted) with
   * `lifeline.event_loop.blocked_ms`, `lifeline.event_loop.blocked_in` and a link to the watchdog's
   * span. At most one per `minIntervalMs`.
   */
  onEventLoopBlock(block: BlockedLoop, snapshot: () => DiagnosticSnapshot): void {
    const now = Date.now();
    if (this.#lastBlockEmit !== undefined && now - this.#lastBlockEmit < this.#minIntervalMs) return;
    this.#lastBlockEmit = now;
    this.#emit(snapshot(), block);
  }

  /**
   * The snapshot of these components now: the trees of their ticks' traces still in flight (with
   * an in-flight tracker) and the process view. What a verdict exports, and `diagnose()` returns.
   */
  snapshot(unhealthy: readonly DiagnosedComponent[]): DiagnosticSnapshot {
    const now = Date.now();
    return {
      at: now,
      unhealthy: unhealthy.map((c) => c.name),
      components: unhealthy.map((c) => componentSnapshot(c, this.#inFlight, now, this.#redactor)),
      process: {
        pid: process.pid,
        uptimeS: Math.round(process.uptime()),
        handles: this.#process.handles(),
        activeResources: this.#process.activeResources(),
        eventLoopDelayMs: this.#process.eventLoopDelayMs(),
      },
      evicted: this.#inFlight?.evicted ?? 0,
    };
  }

  /** Stops sampling event-loop delay, and the stuck-work rounds. */
  close(): void {
    this.#process.stop();
    this.watchStuck(undefined);
  }

  /**
   * @internal Runs {@link Diagnostics.exportStuck} every `intervalMs` (the catalog's interval: stuck
   * work is exported within one interval of becoming stuck), or stops it (`undefined`). Unref-ed.
   */
  watchStuck(intervalMs: number | undefined): void {
    clearInterval(this.#stuckTimer);
    this.#stuckTimer = undefined;
    if (intervalMs === undefined || this.#inFlight === undefined) return;
    this.#stuckTimer = setInterval(() => {
      try {
        this.exportStuck();
      } catch (error) {
        // Showing stuck work must never take down the process doing it.
        logSwallowed(this.#logger ?? defaultLogger(), 'exporting stuck work', error);
      }
    }, intervalMs).unref();
  }

  /**
   * Exports work that is stuck, with no verdict needed (a service that registered no component has
   * none; a component's tick work is left to its verdict): every span still in flight past its
   * deadline, and every request (server span) or call (client span) with no deadline in flight for
   * `stuckAfterMs`, as an `(in flight)` snapshot of it and its subtree (the same snapshot spans a
   * verdict exports: `lifeline.in_flight`, status ERROR, the creation stack), rooted in its own
   * trace. Once per span, and once more a minute later. At most 10 trees a round and 3 per route
   * each `minIntervalMs`; what the caps leave out is counted in one `stuck work` summary span per
   * `minIntervalMs`. Cost: one pass over the tracked spans.
   * @example
   * ```ts
   * const { stuck, exported } = diagnostics.exportStuck(); // what lifeline's own round does every catalog interval
   * ```
   */
  exportStuck(now: number = Date.now()): StuckRound {
    return this.#stuck.round(now, undefined);
  }

  /**
   * @internal The process is ending (`why`: `SIGTERM`): everything still in flight is exported now,
   * stuck or not, as `(in flight, …, at SIGTERM)` snapshots, so what it was doing when it was
   * killed is in the last flush. At most `ENDING_TREES` (32) trees (no per-route caps); the rest
   * in one summary.
   */
  exportEnding(why: string, now: number = Date.now()): StuckRound {
    return this.#stuck.round(now, why);
  }

  /**
   * @internal The process is dying of `error` (`why`: `uncaught exception` or `unhandled rejection`):
   * one root span says so — status ERROR, the exception (its message and stack redacted), a link to
   * the span it was thrown in (call it in that context) — and everything in flight is exported as
   * by {@link Diagnostics.exportEnding}, `(in flight, …, at uncaught exception)`.
   */
  exportCrash(error: unknown, why: string, now: number = Date.now()): StuckRound {
    this.#stuck.crash(error, why, now, trace.getSpanContext(apiContext.active()));
    return this.exportEnding(why, now);
  }

  /**
   * @internal The stuck spans of the last round, by `kind\noperation` (a server span's method and
   * route, else its name; the first `STUCK_SERIES` (50) operations, then `_OTHER`): what the
   * `lifeline.in_flight.stuck` gauge reports.
   */
  get stuckCounts(): ReadonlyMap<string, number> {
    return this.#stuck.counts;
  }

  /** A verdict: its spans (see {@link Diagnostics.snapshot}), then its log lines. */
  #emit(snapshot: DiagnosticSnapshot, block?: BlockedLoop): void {
    this.#verdicts.export(snapshot, block);
    logVerdict(this.#logger ?? defaultLogger(), this.#log, snapshot);
  }
}
