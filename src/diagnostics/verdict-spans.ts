import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Link, type Span, type Tracer } from '@opentelemetry/api';
import type { Redactor } from '../redaction/index.js';
import {
  ATTR_DIAGNOSTIC_OVERVIEW,
  ATTR_DIAGNOSTIC_SPAN_TREE,
  ATTR_DIAGNOSTIC_STACKS,
  ATTR_DIAGNOSTIC_TRUNCATED,
  ATTR_EVENT_LOOP_BLOCKED_IN,
  ATTR_EVENT_LOOP_BLOCKED_MS,
  ATTR_HEALTH_COMPONENT,
  ATTR_HEALTH_PROBE,
  ATTR_HEALTH_UNHEALTHY,
  EVENT_DIAGNOSTIC,
} from '../semconv/index.js';
import { cap, componentSummary, formatStacks, spanTree, summarize, verdictName } from './describe.js';
import { MAX_SNAPSHOT_SPANS, type SnapshotBudget, type SnapshotSpans } from './snapshot-spans.js';
import type { BlockedLoop, DiagnosticSnapshot } from './types.js';

// A verdict as spans: the `health verdict: <components>` root with the `lifeline.diagnostic`
// event, a `<component> unhealthy` child per component, and the snapshots of their stuck work.

/** A diagnostic attribute as it goes out: capped, and whether it was. */
type Capped = { text: string; truncated: boolean };

/** Exports verdicts through one tracer, each attribute of the event capped at `maxBytes`. */
export class VerdictSpans {
  readonly #tracer: Tracer;
  readonly #snapshots: SnapshotSpans;
  readonly #redactor: Redactor;
  readonly #maxBytes: number;

  constructor(tracer: Tracer, snapshots: SnapshotSpans, redactor: Redactor, maxBytes: number) {
    this.#tracer = tracer;
    this.#snapshots = snapshots;
    this.#redactor = redactor;
    this.#maxBytes = maxBytes;
  }

  /** Exports the verdict for `snapshot` (after `block`, when the event loop was blocked), its spans untracked. */
  export(snapshot: DiagnosticSnapshot, block: BlockedLoop | undefined): void {
    const summary = cap(summarize(snapshot), this.#maxBytes);
    const tree = cap(spanTree(snapshot), this.#maxBytes);
    const stacks = cap(formatStacks(snapshot), this.#maxBytes);
    const links: Link[] =
      block?.span === undefined
        ? []
        : [{ context: { ...block.span, traceFlags: TraceFlags.SAMPLED }, attributes: { 'lifeline.link': 'event loop blocked' } }];
    const blockedIn = block?.blockedIn === undefined ? undefined : this.#redactor.text(block.blockedIn);
    this.#snapshots.untracked(() => {
      this.#verdictSpans(snapshot, { summary, tree, stacks }, links, block, blockedIn);
    });
  }

  /** The verdict span, its event, a child per component and the snapshots (see `Diagnostics.snapshot`). */
  #verdictSpans(
    snapshot: DiagnosticSnapshot,
    event: Record<'summary' | 'tree' | 'stacks', Capped>,
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
    const stuck = this.#snapshots.exportInFlight(component.inFlight, budget, back);
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
}
