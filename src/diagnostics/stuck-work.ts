import { SpanKind, SpanStatusCode, isSpanContextValid, type SpanContext, type Tracer } from '@opentelemetry/api';
import type { Redactor } from '../redaction/index.js';
import { ATTR_DIAGNOSTIC_OVERVIEW, ATTR_IN_FLIGHT } from '../semconv/index.js';
import { cap } from './describe.js';
import type { StuckRound } from './diagnostics.js';
import type { InFlightSpanProcessor, TrackedSpan } from './in-flight-span-processor.js';
import type { SnapshotSpans } from './snapshot-spans.js';
import { childrenOf, deadlineOfSpan, descendants, inFlightTrees, treeBudget } from './snapshot-tree.js';
import { byKindAndOperation, countStuck, routeOf, type StuckCounts } from './stuck-operations.js';

// Work exported with no verdict: the stuck-work rounds (work past its deadline, or a request or
// call with none in flight too long), and everything in flight when the process ends.

/** Stuck trees exported per round at most, and per route (or span name) per `minIntervalMs`: a storm of stuck requests is summarised, not exported one by one. */
const STUCK_PER_ROUND = 10;
const STUCK_PER_ROUTE = 3;
/** A stuck span is exported once when found, and once more this long after (by then it is a hang, not a slow answer). */
const STUCK_AGAIN_MS = 60_000;
/** Trees exported at most when the process is ending (SIGTERM): one flush must still fit its budget. */
const ENDING_TREES = 32;
/** The crash span's name at most: the error's first words, as a trace list shows them. */
const CRASH_NAME_BYTES = 160;

/** The settings of the rounds, as `DiagnosticsOptions` has them. */
export interface StuckWorkOptions {
  readonly minIntervalMs: number;
  readonly stuckAfterMs: number;
  readonly maxBytes: number;
}

/** The stuck-work rounds over one tracker (none without one), with the caps' windows and the last round's counts. */
export class StuckWork {
  readonly #inFlight: InFlightSpanProcessor | undefined;
  readonly #snapshots: SnapshotSpans;
  readonly #tracer: Tracer;
  readonly #redactor: Redactor;
  readonly #options: StuckWorkOptions;
  /** Stuck trees exported per route in the current `minIntervalMs` window, and when it began. */
  #stuckByRoute = new Map<string, number>();
  #stuckWindow = 0;
  #lastStuckSummary: number | undefined;
  /** The last round's stuck spans (each heading a stuck subtree) by kind and operation, for the metric. */
  #stuckCounts: ReadonlyMap<string, number[]> = new Map();
  /** The operations the gauge tells apart, for the life of the process (the series stay bounded). */
  readonly #stuckOperations = new Set<string>();

  constructor(
    inFlight: InFlightSpanProcessor | undefined,
    snapshots: SnapshotSpans,
    tracer: Tracer,
    redactor: Redactor,
    options: StuckWorkOptions,
  ) {
    this.#inFlight = inFlight;
    this.#snapshots = snapshots;
    this.#tracer = tracer;
    this.#redactor = redactor;
    this.#options = options;
  }

  /** The last round's stuck spans by `kind\noperation`. */
  get counts(): ReadonlyMap<string, number> {
    return byKindAndOperation(this.#stuckCounts);
  }

  /**
   * One round at `now`: stuck work (`ending` undefined) under the caps, or everything in flight
   * when the process ends (`ending`: why).
   */
  round(now: number, ending: string | undefined): StuckRound {
    const tracker = this.#inFlight;
    if (tracker === undefined) return { stuck: 0, exported: 0, capped: 0 };
    const { minIntervalMs } = this.#options;
    const all = tracker.all();
    if (now - this.#stuckWindow >= minIntervalMs) {
      this.#stuckWindow = now;
      this.#stuckByRoute = new Map();
    }
    let exported = 0;
    let stuckTops = 0;
    let left = 0;
    const capped = new Map<string, number>();
    // Routes are counted for the summary only when one is due: a storm's later rounds only scan.
    const summaryDue = ending !== undefined || this.#lastStuckSummary === undefined || now - this.#lastStuckSummary >= minIntervalMs;
    const cap = ending === undefined ? STUCK_PER_ROUND : ENDING_TREES;
    let children: Map<string, TrackedSpan[]> | undefined;
    const counts: StuckCounts = new Map();
    // One pass, oldest first: a parent started (and was tracked) before its children, so whether it
    // is stuck is known when a child comes.
    // Spans in a stuck subtree (stuck ones, and everything below one) carry this round's number.
    const round = tracker.nextRound();
    for (const span of all) {
      // A component's work: its verdict explains it (linked both ways), within a few intervals.
      if (ending === undefined && tracker.isTickWork(span.traceId)) continue;
      const underStuck = span.parent?.stuckRound === round;
      const stuckMs = underStuck ? undefined : ending === undefined ? this.#stuckFor(span, now) : now - span.startMs;
      if (underStuck) span.stuckRound = round; // shown in its stuck ancestor's tree
      if (stuckMs === undefined) continue;
      span.stuckRound = round;
      stuckTops++;
      if (ending === undefined) countStuck(counts, this.#stuckOperations, span);
      const known = this.#snapshots.exported(span);
      // Once, and once more a minute after the first; everything at the end, exported before or not.
      const due =
        ending !== undefined || known === undefined || (known.again !== true && known.at !== undefined && now - known.at >= STUCK_AGAIN_MS);
      if (!due) continue;
      if (exported >= cap && !summaryDue) {
        left++;
        continue;
      }
      const route = routeOf(span);
      const routeCount = this.#stuckByRoute.get(route) ?? 0;
      if (exported >= cap || (ending === undefined && routeCount >= STUCK_PER_ROUTE)) {
        left++;
        capped.set(route, (capped.get(route) ?? 0) + 1);
        continue;
      }
      children ??= childrenOf(all);
      const subtree = [span, ...descendants(span.spanId, children)];
      const [node] = inFlightTrees(subtree, now, treeBudget(), this.#redactor);
      if (node === undefined) continue;
      if (this.#snapshots.exportStuckTree(node, now, stuckMs, known !== undefined && ending === undefined, ending)) {
        exported++;
        this.#stuckByRoute.set(route, routeCount + 1);
      }
    }
    if (ending === undefined) this.#stuckCounts = counts;
    if (left > 0 && summaryDue) {
      this.#lastStuckSummary = now;
      this.#stuckSummary(capped, left, stuckTops, now, ending);
    }
    return { stuck: stuckTops, exported, capped: left };
  }

  /**
   * The root span saying the process is dying of `error` (`why`): status ERROR, the exception (its
   * message and stack redacted), a link to the span it was thrown in (`thrownIn`).
   */
  crash(error: unknown, why: string, now: number, thrownIn: SpanContext | undefined): void {
    this.#snapshots.untracked(() => {
      const message = this.#redactor.text(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
      const crash = this.#tracer.startSpan(cap(`${why}: ${message}`, CRASH_NAME_BYTES).text, {
        root: true,
        kind: SpanKind.INTERNAL,
        startTime: now,
        attributes: { [ATTR_IN_FLIGHT]: true },
        links:
          thrownIn === undefined || !isSpanContextValid(thrownIn)
            ? []
            : [{ context: thrownIn, attributes: { 'lifeline.link': 'thrown in' } }],
      });
      crash.recordException(
        {
          name: error instanceof Error ? error.name : typeof error,
          message,
          ...(error instanceof Error && error.stack !== undefined ? { stack: this.#redactor.text(error.stack) } : {}),
        },
        now,
      );
      crash.setStatus({ code: SpanStatusCode.ERROR, message: `the process ends: ${message}` });
      crash.end(now);
    });
  }

  /** Ms `span` has been stuck by `now`: past its deadline, or (a request or call with none) in flight over `stuckAfterMs`. */
  #stuckFor(span: TrackedSpan, now: number): number | undefined {
    const kind = span.span.kind;
    // Only a client call gets a deadline after it started (a rule's, recorded on its span): the others
    // keep the one they started under, and a round need not read their attributes.
    const at = kind === SpanKind.CLIENT ? deadlineOfSpan(span) : span.deadlineAt;
    if (at !== undefined) return at < now ? now - at : undefined;
    if (kind !== SpanKind.SERVER && kind !== SpanKind.CLIENT) return undefined;
    const age = now - span.startMs;
    return age >= this.#options.stuckAfterMs ? age : undefined;
  }

  /** One span counting the stuck work the caps left out, by route: what a storm looks like, in one place. */
  #stuckSummary(capped: ReadonlyMap<string, number>, left: number, stuckTops: number, now: number, ending: string | undefined): void {
    const byRoute = [...capped].sort((a, b) => b[1] - a[1]);
    const title = ending === undefined ? 'stuck work' : `in flight at ${ending}`;
    this.#snapshots.untracked(() => {
      const summary = this.#tracer.startSpan(`${title}: ${String(stuckTops)} in flight (${String(left)} not exported one by one)`, {
        root: true,
        kind: SpanKind.INTERNAL,
        startTime: now,
        attributes: {
          [ATTR_IN_FLIGHT]: true,
          [ATTR_DIAGNOSTIC_OVERVIEW]: cap(byRoute.map(([route, n]) => `${String(n)} × ${route}`).join('\n'), this.#options.maxBytes).text,
        },
      });
      summary.setStatus({ code: SpanStatusCode.ERROR, message: `${String(stuckTops)} requests or calls stuck in flight` });
      summary.end(now);
    });
  }
}
