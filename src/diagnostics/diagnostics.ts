import {
  ROOT_CONTEXT,
  SpanKind,
  context as apiContext,
  isSpanContextValid,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import { MAX_TIMER_MS, numberOption, oneOf } from '../errors/index.js';
import { defaultLogger, logSwallowed, type Logger } from '../log/index.js';
import {
  ATTR_DEADLINE_AT,
  ATTR_DEADLINE_SOURCE,
  ATTR_DIAGNOSTIC_SPAN_TREE,
  ATTR_DEADLINE_EXCEEDED,
  ATTR_DIAGNOSTIC_STACKS,
  ATTR_DIAGNOSTIC_OVERVIEW,
  ATTR_DIAGNOSTIC_TRUNCATED,
  ATTR_EVENT_LOOP_BLOCKED_IN,
  ATTR_EVENT_LOOP_BLOCKED_MS,
  ATTR_HEALTH_COMPONENT,
  ATTR_HEALTH_PROBE,
  ATTR_HEALTH_UNHEALTHY,
  ATTR_IN_FLIGHT,
  ATTR_IN_FLIGHT_AGE_MS,
  ATTR_IN_FLIGHT_OVERDUE_MS,
  ATTR_IN_FLIGHT_SPAN_ID,
  EVENT_DIAGNOSTIC,
  OTHER_ADDRESSES,
  isoTime,
  scopeTracer,
} from '../semconv/index.js';
import type { IncomingMessage } from 'node:http';
import { requestHandlers, requestRoute } from '../http/index.js';
import { locateFunction } from './function-location.js';
import type { InFlightSpanProcessor, TrackedSpan } from './in-flight-span-processor.js';
import { ProcessView } from './process-view.js';
import { Redactor } from '../redaction/index.js';
import { cap, componentSummary, count, formatStacks, snapshotName, state, summarize, verdictName, withoutStacks } from './describe.js';
import type { SnapshotIdGenerator } from './snapshot-ids.js';
import { userFrames } from './stacks.js';
import type { BlockedLoop, DiagnosedComponent, DiagnosticSnapshot, HealthDiagnostics, InFlightNode } from './types.js';

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

/** Snapshot spans exported per verdict at most: enough to show stuck work, not a flood. */
const MAX_SNAPSHOT_SPANS = 256;
/**
 * Nodes per component tree, and nodes whose stack is redacted and shown (each frame is scanned
 * for secrets): attributes are capped at a few KiB anyway, so a dump stays fast at 10,000.
 */
const MAX_TREE_NODES = 1_000;
const MAX_STACKS = 256;
/** In-flight spans whose snapshot is remembered (exported once each, linked by later verdicts). */
const REMEMBERED_SNAPSHOTS = 4_096;
/** Stuck trees exported per round at most, and per route (or span name) per `minIntervalMs`: a storm of stuck requests is summarised, not exported one by one. */
const STUCK_PER_ROUND = 10;
const STUCK_PER_ROUTE = 3;
/** A stuck span is exported once when found, and once more this long after (by then it is a hang, not a slow answer). */
const STUCK_AGAIN_MS = 60_000;
/** Operations the stuck gauge tells apart, at most; the rest are `_OTHER`. */
const STUCK_SERIES = 50;
/** Trees exported at most when the process is ending (SIGTERM): one flush must still fit its budget. */
const ENDING_TREES = 32;
/** The crash span's name at most: the error's first words, as a trace list shows them. */
const CRASH_NAME_BYTES = 160;

/** Attributes worth showing for a stuck span: what it calls, where, and for which tick. */
const KEY_ATTRIBUTES = [
  'http.request.method',
  'url.full',
  'url.path',
  'http.route',
  'server.address',
  'server.port',
  'network.peer.address',
  'network.peer.port',
  'lifeline.health.component',
  'lifeline.health.tick',
  'lifeline.deadline.source',
  'db.system.name',
  'db.operation.name',
  'rpc.method',
];

/**
 * Explains unhealthy verdicts: on each healthy→unhealthy transition (and at most every
 * `minIntervalMs` while components stay unhealthy) a `health verdict: <components>` span with the
 * `lifeline.diagnostic` event and a `<component> unhealthy` child per component, `(in flight)`
 * snapshot spans in the stuck traces, and log lines.
 */
export class Diagnostics implements HealthDiagnostics {
  readonly #inFlight: InFlightSpanProcessor | undefined;
  readonly #tracer: Tracer;
  readonly #logger: Logger | undefined;
  readonly #minIntervalMs: number;
  readonly #maxBytes: number;
  readonly #log: 'debug' | 'info';
  readonly #redactor: Redactor;
  readonly #process = new ProcessView();
  readonly #ids: SnapshotIdGenerator | undefined;
  /**
   * Real span ID → its snapshot, oldest first: a span in flight is exported once, not per verdict,
   * and again once its deadline has passed (so it shows it). Only snapshots that were recorded.
   */
  readonly #snapshots = new Map<string, Remembered>();
  #lastEmit: number | undefined;
  #lastBlockEmit: number | undefined;
  readonly #stuckAfterMs: number;
  /** Stuck trees exported per route in the current `minIntervalMs` window, and when it began. */
  #stuckByRoute = new Map<string, number>();
  #stuckWindow = 0;
  #lastStuckSummary: number | undefined;
  #stuckTimer: NodeJS.Timeout | undefined;
  /** The last round's stuck spans (each heading a stuck subtree) by kind and operation, for the metric. */
  #stuckCounts: ReadonlyMap<string, number[]> = new Map();
  /** The operations the gauge tells apart, for the life of the process (the series stay bounded). */
  readonly #stuckOperations = new Set<string>();

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
    numberOption('diagnostics.stuckAfterMs', stuckAfterMs, { min: 1, max: MAX_TIMER_MS, unit: 'ms' });
    this.#stuckAfterMs = stuckAfterMs;
    numberOption('diagnostics.maxBytes', maxBytes, { min: 256, integer: true });
    this.#inFlight = inFlight;
    this.#tracer = scopeTracer(tracerProvider);
    this.#logger = logger;
    this.#minIntervalMs = minIntervalMs;
    this.#maxBytes = maxBytes;
    this.#log = oneOf('diagnostics.log', log, ['debug', 'info']);
    this.#redactor = inFlight?.redactor ?? new Redactor();
    this.#ids = ids;
  }

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

  snapshot(unhealthy: readonly DiagnosedComponent[]): DiagnosticSnapshot {
    const now = Date.now();
    return {
      at: now,
      unhealthy: unhealthy.map((c) => c.name),
      components: unhealthy.map((c) => {
        const spans = c.tick === undefined || this.#inFlight === undefined ? [] : this.#inFlight.spansOf(c.tick.traceId);
        const budget = { nodes: MAX_TREE_NODES, stacks: MAX_STACKS };
        const inFlight = this.#tree(spans, now, budget);
        return { name: c.name, probe: c.probe, tick: c.tick, inFlight, omitted: spans.length - (MAX_TREE_NODES - budget.nodes) };
      }),
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
    return this.#exportStuckWork(now, undefined);
  }

  /**
   * @internal The process is ending (`why`: `SIGTERM`): everything still in flight is exported now,
   * stuck or not, as `(in flight, …, at SIGTERM)` snapshots, so what it was doing when it was
   * killed is in the last flush. At most {@link ENDING_TREES} trees (no per-route caps); the rest
   * in one summary.
   */
  exportEnding(why: string, now: number = Date.now()): StuckRound {
    return this.#exportStuckWork(now, why);
  }

  /**
   * @internal The process is dying of `error` (`why`: `uncaught exception` or `unhandled rejection`):
   * one root span says so — status ERROR, the exception (its message and stack redacted), a link to
   * the span it was thrown in (call it in that context) — and everything in flight is exported as
   * by {@link Diagnostics.exportEnding}, `(in flight, …, at uncaught exception)`.
   */
  exportCrash(error: unknown, why: string, now: number = Date.now()): StuckRound {
    const thrownIn = trace.getSpanContext(apiContext.active());
    this.#untracked(() => {
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
    return this.exportEnding(why, now);
  }

  /**
   * @internal The stuck spans of the last round, by `kind\noperation` (a server span's method and
   * route, else its name; the first {@link STUCK_SERIES} operations, then `_OTHER`): what the
   * `lifeline.in_flight.stuck` gauge reports.
   */
  get stuckCounts(): ReadonlyMap<string, number> {
    // Keyed per collection, not per span: a round only counts by operation and kind index.
    const result = new Map<string, number>();
    for (const [operation, byKind] of this.#stuckCounts)
      byKind.forEach((n, kind) => {
        if (n > 0) result.set(`${KIND_NAMES[kind] ?? 'internal'}\n${operation}`, n);
      });
    return result;
  }

  #exportStuckWork(now: number, ending: string | undefined): StuckRound {
    const tracker = this.#inFlight;
    if (tracker === undefined) return { stuck: 0, exported: 0, capped: 0 };
    const all = tracker.all();
    if (now - this.#stuckWindow >= this.#minIntervalMs) {
      this.#stuckWindow = now;
      this.#stuckByRoute = new Map();
    }
    let exported = 0;
    let stuckTops = 0;
    let left = 0;
    const capped = new Map<string, number>();
    // Routes are counted for the summary only when one is due: a storm's later rounds only scan.
    const summaryDue = ending !== undefined || this.#lastStuckSummary === undefined || now - this.#lastStuckSummary >= this.#minIntervalMs;
    const cap = ending === undefined ? STUCK_PER_ROUND : ENDING_TREES;
    let children: Map<string, TrackedSpan[]> | undefined;
    const counts = new Map<string, number[]>();
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
      const mine = span.remembered;
      const known = mine === undefined ? undefined : mine.by === this ? mine : this.#snapshots.get(span.spanId);
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
      const [node] = this.#tree(subtree, now, { nodes: MAX_TREE_NODES, stacks: MAX_STACKS });
      if (node === undefined) continue;
      if (this.#exportStuckTree(node, now, stuckMs, known !== undefined && ending === undefined, ending)) {
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

  /** Ms `span` has been stuck by `now`: past its deadline, or (a request or call with none) in flight over `stuckAfterMs`. */
  #stuckFor(span: TrackedSpan, now: number): number | undefined {
    const kind = span.span.kind;
    // Only a client call gets a deadline after it started (a rule's, recorded on its span): the others
    // keep the one they started under, and a round need not read their attributes.
    const at = kind === SpanKind.CLIENT ? deadlineOfSpan(span) : span.deadlineAt;
    if (at !== undefined) return at < now ? now - at : undefined;
    if (kind !== SpanKind.SERVER && kind !== SpanKind.CLIENT) return undefined;
    const age = now - span.startMs;
    return age >= this.#stuckAfterMs ? age : undefined;
  }

  /** Exports one stuck tree (again: a second time, a minute on); true when it was recorded. */
  #exportStuckTree(node: InFlightNode, now: number, stuckMs: number, again: boolean, ending: string | undefined): boolean {
    let recorded = false;
    this.#untracked(() => {
      const overdueMs = node.deadline !== undefined && node.deadline.remainingMs < 0 ? -node.deadline.remainingMs : undefined;
      const snapshot = this.#snapshotOf(node, undefined, undefined, now, overdueMs === undefined ? stuckMs : undefined, ending);
      recorded = snapshot.isRecording();
      if (!recorded) return;
      const context = snapshot.spanContext();
      this.#remember(node.spanId, { context, overdue: overdueMs !== undefined, again, at: now });
      this.#exportInFlight(node.children, { left: MAX_SNAPSHOT_SPANS, endTime: now }, undefined, context);
    });
    return recorded;
  }

  /** One span counting the stuck work the caps left out, by route: what a storm looks like, in one place. */
  #stuckSummary(capped: ReadonlyMap<string, number>, left: number, stuckTops: number, now: number, ending: string | undefined): void {
    const byRoute = [...capped].sort((a, b) => b[1] - a[1]);
    const title = ending === undefined ? 'stuck work' : `in flight at ${ending}`;
    this.#untracked(() => {
      const summary = this.#tracer.startSpan(`${title}: ${String(stuckTops)} in flight (${String(left)} not exported one by one)`, {
        root: true,
        kind: SpanKind.INTERNAL,
        startTime: now,
        attributes: {
          [ATTR_IN_FLIGHT]: true,
          [ATTR_DIAGNOSTIC_OVERVIEW]: cap(byRoute.map(([route, n]) => `${String(n)} × ${route}`).join('\n'), this.#maxBytes).text,
        },
      });
      summary.setStatus({ code: SpanStatusCode.ERROR, message: `${String(stuckTops)} requests or calls stuck in flight` });
      summary.end(now);
    });
  }

  #untracked(run: () => void): void {
    if (this.#inFlight === undefined) run();
    else this.#inFlight.untracked(run);
  }

  #remember(spanId: string, entry: Remembered): void {
    // On the span too, while in flight: a storm's later rounds read it there, not from the map.
    const tracked = this.#inFlight?.get(spanId);
    if (tracked !== undefined) tracked.remembered = { by: this, again: entry.again, at: entry.at };
    this.#snapshots.delete(spanId);
    this.#snapshots.set(spanId, entry);
    if (this.#snapshots.size > REMEMBERED_SNAPSHOTS) this.#snapshots.delete(this.#snapshots.keys().next().value as string);
  }

  #tree(spans: readonly TrackedSpan[], now: number, budget: { nodes: number; stacks: number }): InFlightNode[] {
    const ids = new Set(spans.map((s) => s.spanId));
    const children = new Map<string | undefined, TrackedSpan[]>();
    for (const span of spans) {
      const parent = span.parentSpanId !== undefined && ids.has(span.parentSpanId) ? span.parentSpanId : undefined;
      const siblings = children.get(parent);
      if (siblings === undefined) children.set(parent, [span]);
      else siblings.push(span);
    }
    const build = (span: TrackedSpan): InFlightNode => {
      budget.nodes--;
      const frames = budget.stacks-- > 0 ? userFrames(span.stack).map((frame) => this.#redactor.text(frame)) : [];
      // The attribute is the one record of a deadline a policy gave the span after it started.
      const deadlineAt = deadlineOfSpan(span);
      return {
        name: this.#redactor.text(span.span.name),
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId,
        ageMs: Math.round(now - span.startMs),
        startedAt: span.startMs,
        deadline: deadlineAt === undefined ? undefined : { at: deadlineAt, remainingMs: Math.round(deadlineAt - now) },
        attributes: this.#keyAttributes(span),
        origin: frames[0]?.replace(/^at /, ''),
        stack: frames.length === 0 ? undefined : frames.join('\n'),
        children: within(children.get(span.spanId) ?? [], budget).map(build),
      };
    };
    return within(children.get(undefined) ?? [], budget).map(build);
  }

  #keyAttributes(span: TrackedSpan): Record<string, string | number | boolean> {
    const result: Record<string, string | number | boolean> = {};
    for (const key of KEY_ATTRIBUTES) {
      const value = span.span.attributes[key];
      if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
      const redacted = this.#redactor.attribute(key, value);
      result[key] = redacted === undefined ? value : (redacted as string);
    }
    const route = span.request === undefined || result['http.route'] !== undefined ? undefined : requestRoute(span.request);
    if (route !== undefined) result['http.route'] = route;
    return result;
  }

  #emit(snapshot: DiagnosticSnapshot, block?: BlockedLoop): void {
    const summary = cap(summarize(snapshot), this.#maxBytes);
    const tree = cap(
      JSON.stringify(
        snapshot.components.map(({ name, tick, inFlight, omitted }) => ({
          component: name,
          tick:
            tick === undefined
              ? undefined
              : { traceId: tick.traceId, spanId: tick.spanId, seq: tick.seq, deadline: isoTime(tick.deadline) },
          omitted,
          inFlight: inFlight.map(withoutStacks),
        })),
      ),
      this.#maxBytes,
    );
    const stacks = cap(formatStacks(snapshot), this.#maxBytes);
    const links: Link[] =
      block?.span === undefined
        ? []
        : [{ context: { ...block.span, traceFlags: TraceFlags.SAMPLED }, attributes: { 'lifeline.link': 'event loop blocked' } }];
    const blockedIn = block?.blockedIn === undefined ? undefined : this.#redactor.text(block.blockedIn);
    this.#untracked(() => {
      this.#verdictSpans(snapshot, { summary, tree, stacks }, links, block, blockedIn);
    });

    const logger = this.#logger ?? defaultLogger();
    logger.info(
      { unhealthy: snapshot.unhealthy, inFlight: snapshot.components.reduce((n, c) => n + count(c.inFlight), 0) },
      'health verdict: unhealthy components',
    );
    logger[this.#log](
      {
        diagnostic: {
          components: JSON.parse(JSON.stringify(snapshot.components)) as unknown,
          process: snapshot.process,
          evicted: snapshot.evicted,
        },
      },
      'health diagnostic',
    );
  }

  /** The verdict span, its event, a child per component and the snapshots (see {@link Diagnostics.snapshot}). */
  #verdictSpans(
    snapshot: DiagnosticSnapshot,
    event: Record<'summary' | 'tree' | 'stacks', { text: string; truncated: boolean }>,
    links: Link[],
    block: BlockedLoop | undefined,
    blockedIn: string | undefined,
  ): void {
    const { summary, tree, stacks } = event;
    const verdict = this.#tracer.startSpan(verdictName(snapshot.unhealthy), {
      root: true,
      kind: SpanKind.INTERNAL,
      links,
      attributes: {
        [ATTR_HEALTH_UNHEALTHY]: [...snapshot.unhealthy],
        ...(block === undefined ? {} : { [ATTR_EVENT_LOOP_BLOCKED_MS]: Math.round(block.blockedMs) }),
        ...(blockedIn === undefined ? {} : { [ATTR_EVENT_LOOP_BLOCKED_IN]: blockedIn }),
      },
    });
    // The overview first (UIs list an event's attributes in order, Jaeger's alphabetically); the tree renders tall.
    verdict.addEvent(EVENT_DIAGNOSTIC, {
      [ATTR_DIAGNOSTIC_OVERVIEW]: summary.text,
      [ATTR_DIAGNOSTIC_SPAN_TREE]: tree.text,
      [ATTR_DIAGNOSTIC_STACKS]: stacks.text,
      [ATTR_DIAGNOSTIC_TRUNCATED]: summary.truncated || tree.truncated || stacks.truncated,
    });
    const why =
      block === undefined
        ? ''
        : ` (event loop blocked for ${(block.blockedMs / 1_000).toFixed(1)} s${blockedIn === undefined ? '' : ` in ${blockedIn}`})`;
    verdict.setStatus({ code: SpanStatusCode.ERROR, message: `unhealthy: ${snapshot.unhealthy.join(', ')}${why}` });
    // One end for this verdict's snapshot spans: the state at the verdict (a child ending after its
    // parent reads as clock skew in Jaeger; one added under an earlier verdict's snapshot still does).
    const budget = { left: MAX_SNAPSHOT_SPANS, endTime: snapshot.at };
    try {
      for (const component of snapshot.components) this.#explain(component, verdict, budget);
    } finally {
      verdict.end();
    }
  }

  /**
   * One child of the verdict per unhealthy component, found by `lifeline.health.component`, linked
   * both ways with the snapshot of the component's stuck tick.
   */
  #explain(component: DiagnosticSnapshot['components'][number], verdict: Span, budget: SnapshotBudget): void {
    const why = this.#tracer.startSpan(
      `${component.name} unhealthy`,
      { kind: SpanKind.INTERNAL, attributes: { [ATTR_HEALTH_COMPONENT]: component.name, [ATTR_HEALTH_PROBE]: component.probe } },
      trace.setSpan(ROOT_CONTEXT, verdict),
    );
    const back: Link = { context: why.spanContext(), attributes: { 'lifeline.link': 'health verdict' } };
    const stuck = this.#exportInFlight(component.inFlight, budget, back);
    for (const context of stuck) why.addLink({ context, attributes: { 'lifeline.link': 'stuck tick (in flight)' } });
    // Nothing in flight to show (untraced work, or it ended): the real tick, once it is exported.
    if (stuck.length === 0 && component.tick !== undefined)
      why.addLink({
        context: { traceId: component.tick.traceId, spanId: component.tick.spanId, traceFlags: TraceFlags.SAMPLED },
        attributes: { 'lifeline.link': 'last tick' },
      });
    why.setStatus({ code: SpanStatusCode.ERROR, message: componentSummary(component).join('\n') });
    why.end();
  }

  /**
   * Exports a snapshot span per in-flight span, so Jaeger shows stuck work whose real span has not
   * ended; once per span (a later verdict links to it). A tree's roots become roots of their own
   * trace (see {@link SnapshotIdGenerator}), linked back to the verdict; the rest hang under their
   * parent's snapshot. Returns the roots' snapshots.
   */
  #exportInFlight(nodes: readonly InFlightNode[], budget: SnapshotBudget, back: Link | undefined, parent?: SpanContext): SpanContext[] {
    const roots: SpanContext[] = [];
    for (const node of nodes) {
      const overdue = node.deadline !== undefined && node.deadline.remainingMs < 0;
      const known = this.#snapshots.get(node.spanId);
      let context = known?.context;
      if (known === undefined || (overdue && !known.overdue)) {
        if (budget.left <= 0) break;
        budget.left--;
        const snapshot = this.#snapshotOf(node, back, parent, budget.endTime);
        context = snapshot.spanContext();
        // Not recorded (a sampler said no, a no-op provider): the next verdict tries again.
        if (snapshot.isRecording()) this.#remember(node.spanId, { context, overdue });
      }
      if (context === undefined) continue;
      if (parent === undefined) roots.push(context);
      this.#exportInFlight(node.children, budget, back, context);
    }
    return roots;
  }

  /** Exports one snapshot span; returns it ended (its `isRecording()` says whether it was recorded). */
  #snapshotOf(
    node: InFlightNode,
    back: Link | undefined,
    parent: SpanContext | undefined,
    endTime: number,
    stuckMs?: number,
    ending?: string,
  ): { spanContext(): SpanContext; isRecording(): boolean } {
    const tracked = this.#inFlight?.get(node.spanId);
    const attributes: Attributes = {};
    for (const [key, value] of Object.entries(tracked?.span.attributes ?? node.attributes)) {
      if (value === undefined || value === null) continue;
      attributes[key] = this.#redactor.attribute(key, value) ?? value;
    }
    // A route matched since the span started (known to its framework, recorded only at its end).
    const route = node.attributes['http.route'];
    if (attributes['http.route'] === undefined && route !== undefined) attributes['http.route'] = route;
    const overdueMs = node.deadline !== undefined && node.deadline.remainingMs < 0 ? -node.deadline.remainingMs : undefined;
    const kind = tracked?.span.kind ?? SpanKind.INTERNAL;
    const options = {
      kind,
      startTime: node.startedAt,
      attributes: {
        ...attributes,
        [ATTR_IN_FLIGHT]: true,
        [ATTR_IN_FLIGHT_SPAN_ID]: node.spanId,
        [ATTR_IN_FLIGHT_AGE_MS]: node.ageMs,
        ...(overdueMs === undefined ? {} : { [ATTR_IN_FLIGHT_OVERDUE_MS]: overdueMs, [ATTR_DEADLINE_EXCEEDED]: true }),
        ...(node.origin === undefined ? {} : { 'code.stacktrace': node.stack ?? node.origin }),
        ...(kind === SpanKind.SERVER ? handlerAttributes(tracked?.request, ending !== undefined) : {}),
      },
    };
    const name = snapshotName(node, kind, overdueMs, ending === undefined || node.deadline === undefined ? stuckMs : undefined, ending);
    const links = back === undefined ? [] : [back];
    const snapshot =
      parent === undefined
        ? this.#ids === undefined
          ? this.#tracer.startSpan(name, { ...options, root: true, links })
          : this.#ids.inTrace(node.traceId, () => this.#tracer.startSpan(name, { ...options, root: true, links }))
        : this.#tracer.startSpan(name, options, trace.setSpanContext(ROOT_CONTEXT, parent));
    // Past its deadline (or stuck with none) and still running: the culprit, marked as an error where a trace list shows one.
    if (overdueMs !== undefined || stuckMs !== undefined)
      snapshot.setStatus({ code: SpanStatusCode.ERROR, message: ending === undefined ? state(node) : `${state(node)}, at ${ending}` });
    const recorded = snapshot.isRecording();
    snapshot.end(endTime);
    return { spanContext: () => snapshot.spanContext(), isRecording: () => recorded };
  }
}

/** A span in flight whose snapshot was exported: once per span; `at` (stuck work's) for the second, a minute later. */
interface Remembered {
  readonly context: SpanContext;
  readonly overdue: boolean;
  readonly again?: boolean;
  readonly at?: number;
}

/** Snapshot spans a verdict may still export, and when they all end. */
interface SnapshotBudget {
  left: number;
  readonly endTime: number;
}

/**
 * A request's handler as `code.*` attributes: a server span starts before its handler runs, so its
 * creation stack cannot name it. While the process runs, the route handler's name a framework
 * matched (Express's `req.route`), which costs nothing. When it is ending (`locate`), also where
 * the app's function serving it is defined, from V8: the first lookup lists the loaded scripts,
 * a pause of up to a few hundred ms that a running service must not take, but an ending one can.
 */
function handlerAttributes(request: IncomingMessage | undefined, locate: boolean): Attributes {
  if (request === undefined) return {};
  const handlers = requestHandlers(request);
  if (!locate) {
    const name = requestRoute(request) === undefined ? undefined : handlers[0]?.name;
    return name === undefined || name === '' ? {} : { 'code.function.name': name };
  }
  for (const handler of handlers) {
    const at = locateFunction(handler);
    if (at === undefined) continue; // the framework's own (in node_modules), or not locatable
    return {
      ...(at.function === undefined ? {} : { 'code.function.name': at.function }),
      'code.file.path': at.file,
      'code.line.number': at.line,
      'code.column.number': at.column,
    };
  }
  return {};
}

/** The first nodes of `spans` that the budget still allows (each `build` then spends one). */
function within(spans: TrackedSpan[], budget: { nodes: number }): TrackedSpan[] {
  return spans.length <= budget.nodes ? spans : spans.slice(0, Math.max(0, budget.nodes));
}

/** What the stuck-work caps count by: a server span's route, else the span's name. */
function routeOf(tracked: TrackedSpan): string {
  if (tracked.route !== undefined) return tracked.route;
  const { attributes, name, kind } = tracked.span;
  const route = attributes['http.route'] ?? (tracked.request === undefined ? undefined : requestRoute(tracked.request));
  const method = attributes['http.request.method'];
  const host = attributes['server.address'];
  tracked.route =
    typeof route === 'string'
      ? typeof method === 'string'
        ? routeName(method, route)
        : route
      : kind === SpanKind.CLIENT && typeof host === 'string'
        ? routeName(name, host) // a client's GET is told apart by where it goes
        : name;
  return tracked.route;
}

/** `${first} ${second}` strings made before, by their parts (a storm's 10,000 spans share a few routes). */
const routeNames = new Map<string, Map<string, string>>();

/**
 * `${first} ${second}`, the same string for the same parts: a storm's first round counts 10,000
 * spans by route, and a string made per span is also hashed per span, by each map it meets.
 * Bounded (32 × 512); beyond it a string is made each time.
 */
function routeName(first: string, second: string): string {
  let bySecond = routeNames.get(first);
  if (bySecond === undefined) {
    if (routeNames.size >= 32) return `${first} ${second}`;
    bySecond = new Map();
    routeNames.set(first, bySecond);
  }
  let name = bySecond.get(second);
  if (name === undefined) {
    name = `${first} ${second}`;
    if (bySecond.size < 512) bySecond.set(second, name);
  }
  return name;
}

/** In-flight spans by parent span ID, built once per round. */
function childrenOf(spans: readonly TrackedSpan[]): Map<string, TrackedSpan[]> {
  const children = new Map<string, TrackedSpan[]>();
  for (const span of spans) {
    if (span.parentSpanId === undefined) continue;
    const siblings = children.get(span.parentSpanId);
    if (siblings === undefined) children.set(span.parentSpanId, [span]);
    else siblings.push(span);
  }
  return children;
}

/** Every in-flight span below `spanId`, at most {@link MAX_TREE_NODES}. */
function descendants(spanId: string, children: ReadonlyMap<string, readonly TrackedSpan[]>): TrackedSpan[] {
  const result: TrackedSpan[] = [];
  const stack = [spanId];
  while (stack.length > 0 && result.length < MAX_TREE_NODES) {
    for (const child of children.get(stack.pop() ?? '') ?? []) {
      result.push(child);
      stack.push(child.spanId);
    }
  }
  return result;
}

/**
 * The deadline `tracked` is bound by (epoch ms), or `undefined`: the one its span records
 * (`lifeline.deadline.at`, set at its start from the context, or later by a policy rule, which only
 * tightens it), not the headers bound, which bounds a response head, not the work. Read without
 * parsing a date per round: the tracker kept the context's deadline and the very text recorded for
 * it at the span's start, and a text seen before is not parsed again.
 */
function deadlineOfSpan(tracked: TrackedSpan): number | undefined {
  const { attributes } = tracked.span;
  const recorded = attributes[ATTR_DEADLINE_AT];
  if (typeof recorded !== 'string') return undefined;
  if (recorded === tracked.deadlineText) return tracked.deadlineAt;
  const parsed = Date.parse(recorded);
  tracked.deadlineText = recorded;
  tracked.deadlineAt = attributes[ATTR_DEADLINE_SOURCE] === 'headers' || Number.isNaN(parsed) ? undefined : parsed;
  return tracked.deadlineAt;
}

const KIND_NAMES = ['internal', 'server', 'client', 'producer', 'consumer'];

/** Counts `span` in `counts` by kind and operation: the first {@link STUCK_SERIES} operations ever seen (`operations`), the rest `_OTHER`. */
function countStuck(counts: Map<string, number[]>, operations: Set<string>, span: TrackedSpan): void {
  let operation = routeOf(span);
  if (!operations.has(operation)) {
    if (operations.size < STUCK_SERIES) operations.add(operation);
    else operation = OTHER_ADDRESSES;
  }
  let byKind = counts.get(operation);
  if (byKind === undefined) counts.set(operation, (byKind = KIND_NAMES.map(() => 0)));
  const kind: number = span.span.kind;
  if (kind >= KIND_NAMES.length) return; // no such kind: not counted
  byKind[kind] = (byKind[kind] ?? 0) + 1;
}
