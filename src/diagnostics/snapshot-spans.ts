import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Link,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import type { IncomingMessage } from 'node:http';
import { requestHandlers, requestRoute } from '../http/index.js';
import type { Redactor } from '../redaction/index.js';
import {
  ATTR_DEADLINE_EXCEEDED,
  ATTR_IN_FLIGHT,
  ATTR_IN_FLIGHT_AGE_MS,
  ATTR_IN_FLIGHT_OVERDUE_MS,
  ATTR_IN_FLIGHT_SPAN_ID,
} from '../semconv/index.js';
import { snapshotName, state } from './describe.js';
import { locateFunction } from './function-location.js';
import type { InFlightSpanProcessor, TrackedSpan } from './in-flight-span-processor.js';
import type { SnapshotIdGenerator } from './snapshot-ids.js';
import type { InFlightNode } from './types.js';

// The `(in flight)` snapshot spans: Jaeger shows stuck work whose real span has not ended (it may
// never end) through them. A verdict and a stuck-work round export them alike, and each span in
// flight is exported once (a second time only as the rules below say), whoever exports it.

/** Snapshot spans exported per verdict at most: enough to show stuck work, not a flood. */
export const MAX_SNAPSHOT_SPANS = 256;
/** In-flight spans whose snapshot is remembered (exported once each, linked by later verdicts). */
const REMEMBERED_SNAPSHOTS = 4_096;

/** Snapshot spans a verdict may still export, and when they all end. */
export interface SnapshotBudget {
  left: number;
  readonly endTime: number;
}

/** A span in flight whose snapshot was exported: once per span; `at` (stuck work's) for the second, a minute later. */
interface Remembered {
  readonly context: SpanContext;
  readonly overdue: boolean;
  readonly again?: boolean;
  readonly at?: number;
}

/** What a stuck-work round reads of an earlier export: whether it was the second, and when (stuck work's). */
export interface Exported {
  readonly again?: boolean | undefined;
  readonly at?: number | undefined;
}

/** Exports snapshot spans through one tracer, and remembers which in-flight spans it exported. */
export class SnapshotSpans {
  readonly #tracer: Tracer;
  readonly #inFlight: InFlightSpanProcessor | undefined;
  readonly #redactor: Redactor;
  readonly #ids: SnapshotIdGenerator | undefined;
  /**
   * Real span ID → its snapshot, oldest first: a span in flight is exported once, not per verdict,
   * and again once its deadline has passed (so it shows it). Only snapshots that were recorded.
   */
  readonly #snapshots = new Map<string, Remembered>();

  constructor(tracer: Tracer, inFlight: InFlightSpanProcessor | undefined, redactor: Redactor, ids: SnapshotIdGenerator | undefined) {
    this.#tracer = tracer;
    this.#inFlight = inFlight;
    this.#redactor = redactor;
    this.#ids = ids;
  }

  /** Runs `run` with the spans it starts untracked: a diagnostic's own spans are not work in flight. */
  untracked(run: () => void): void {
    if (this.#inFlight === undefined) run();
    else this.#inFlight.untracked(run);
  }

  /** The export of `span`'s snapshot, if these spans made one: read on the span first (a tracker may serve several). */
  exported(span: TrackedSpan): Exported | undefined {
    const mine = span.remembered;
    return mine === undefined ? undefined : mine.by === this ? mine : this.#snapshots.get(span.spanId);
  }

  /**
   * Exports a snapshot span per in-flight span, so Jaeger shows stuck work whose real span has not
   * ended; once per span (a later verdict links to it). A tree's roots become roots of their own
   * trace (see {@link SnapshotIdGenerator}), linked back to the verdict; the rest hang under their
   * parent's snapshot. Returns the roots' snapshots.
   */
  exportInFlight(nodes: readonly InFlightNode[], budget: SnapshotBudget, back: Link | undefined, parent?: SpanContext): SpanContext[] {
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
      this.exportInFlight(node.children, budget, back, context);
    }
    return roots;
  }

  /** Exports one stuck tree (again: a second time, a minute on); true when it was recorded. */
  exportStuckTree(node: InFlightNode, now: number, stuckMs: number, again: boolean, ending: string | undefined): boolean {
    let recorded = false;
    this.untracked(() => {
      const overdueMs = node.deadline !== undefined && node.deadline.remainingMs < 0 ? -node.deadline.remainingMs : undefined;
      const snapshot = this.#snapshotOf(node, undefined, undefined, now, overdueMs === undefined ? stuckMs : undefined, ending);
      recorded = snapshot.isRecording();
      if (!recorded) return;
      const context = snapshot.spanContext();
      this.#remember(node.spanId, { context, overdue: overdueMs !== undefined, again, at: now });
      this.exportInFlight(node.children, { left: MAX_SNAPSHOT_SPANS, endTime: now }, undefined, context);
    });
    return recorded;
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

  #remember(spanId: string, entry: Remembered): void {
    // On the span too, while in flight: a storm's later rounds read it there, not from the map.
    const tracked = this.#inFlight?.get(spanId);
    if (tracked !== undefined) tracked.remembered = { by: this, again: entry.again, at: entry.at };
    this.#snapshots.delete(spanId);
    this.#snapshots.set(spanId, entry);
    if (this.#snapshots.size > REMEMBERED_SNAPSHOTS) this.#snapshots.delete(this.#snapshots.keys().next().value as string);
  }
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
