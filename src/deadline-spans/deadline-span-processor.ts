import { SpanKind, SpanStatusCode, type Context, type Span as ApiSpan } from '@opentelemetry/api';
// Types only: the core entry depends on the API at run time, never on the SDK.
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { deadlineOf, monotonicNow, type DeadlineSource } from '../deadline/index.js';
import {
  ATTR_DEADLINE_AT,
  ATTR_DEADLINE_BUDGET_MS,
  ATTR_DEADLINE_EXCEEDED,
  ATTR_DEADLINE_MISSING,
  ATTR_DEADLINE_OVERDUE_MS,
  ATTR_DEADLINE_SOURCE,
  ATTR_HEALTH_TICK,
  ATTR_IN_FLIGHT,
  isoTime,
} from '../semconv/index.js';

const ATTR_ERROR_TYPE = 'error.type';
const DEADLINE_ERROR_CODE = 'ERR_DEADLINE_EXCEEDED';
/** How a `DeadlineExceededError`'s message begins. */
const DEADLINE_MESSAGE = 'deadline exceeded (';

/**
 * Records deadlines on spans. Every span started under a deadline gets
 * `lifeline.deadline.at`, `budget_ms` (remaining at start) and `source`; a client span started with
 * no deadline at all gets `lifeline.deadline.missing` — the calls nobody bounded, including those
 * only `headersTimeoutMs` bounds (`source` `headers`, `at` the bound on their head). A span that ends
 * with a `DeadlineExceededError` (as the undici instrumentation records a call lifeline aborted) is
 * marked `lifeline.deadline.exceeded`, `error.type` = `timeout`, status ERROR. A span that ends after
 * its deadline without having been cut by it (it overran) is marked `lifeline.deadline.exceeded` and
 * `lifeline.deadline.overdue_ms` (how far past), its status left as it was.
 */
export class DeadlineSpanProcessor implements SpanProcessor {
  /**
   * Records the deadline the span starts under (`lifeline.deadline.at`, `budget_ms`, `source`), and
   * marks a client span with none, or only a headers bound, `lifeline.deadline.missing`. A tick
   * span keeps the deadline it already carries.
   */
  onStart(span: Span, parentContext: Context): void {
    // Tick spans carry their own deadline; a scope around the tick must not overwrite it.
    if (span.attributes[ATTR_DEADLINE_SOURCE] !== undefined) return;
    const deadline = deadlineOf(parentContext);
    if (deadline !== undefined) {
      recordDeadline(span, deadline, span.kind === SpanKind.CLIENT && deadline.source === 'headers');
    } else if (span.kind === SpanKind.CLIENT) {
      span.setAttribute(ATTR_DEADLINE_MISSING, true);
    }
  }

  /**
   * Marks a span its deadline ended (`lifeline.deadline.exceeded`, `error.type` `timeout`, status
   * ERROR), or one that ended past its deadline (`lifeline.deadline.exceeded`, `overdue_ms`).
   */
  onEnding(span: Span): void {
    if (endedByDeadline(span)) {
      span.setAttribute(ATTR_ERROR_TYPE, 'timeout');
      span.setAttribute(ATTR_DEADLINE_EXCEEDED, true);
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'deadline exceeded' });
      return;
    }
    const overdueMs = overranBy(span);
    // It overran: nothing cut it (a handler that answered late, a call no client bounds). Marked, not
    // failed: its status is the app's (a 200 answered late is still a 200).
    if (overdueMs === undefined) return;
    span.setAttribute(ATTR_DEADLINE_EXCEEDED, true);
    span.setAttribute(ATTR_DEADLINE_OVERDUE_MS, overdueMs);
  }

  /** Nothing: the span was marked in `onEnding`, while it could still change. */
  onEnd(_span: ReadableSpan): void {
    // Everything happens while the span can still be changed.
  }

  /** Nothing to flush (it exports nothing): resolves at once. */
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  /** Nothing to release: resolves at once. */
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * Records on `span` the deadline its work is bound by. For a client span whose call got its
 * deadline after the span started (a policy rule on a node:http call), `missing` turns false; a
 * headers bound (`source` `headers`) leaves it true: the rest of the call has no deadline.
 */
export function recordDeadline(
  span: ApiSpan,
  deadline: { readonly at: number; readonly monotonicAt: number; readonly source: DeadlineSource; readonly atText?: string },
  forClient = false,
): void {
  // One call each rather than an object for setAttributes: this runs for every span under a deadline.
  span.setAttribute(ATTR_DEADLINE_AT, deadline.atText ?? isoTime(deadline.at));
  span.setAttribute(ATTR_DEADLINE_BUDGET_MS, Math.max(0, Math.round(deadline.monotonicAt - monotonicNow()))); // time left, on the clock that measures it
  span.setAttribute(ATTR_DEADLINE_SOURCE, deadline.source);
  if (forClient) span.setAttribute(ATTR_DEADLINE_MISSING, deadline.source === 'headers');
}

/**
 * Whole ms `span` ran past its deadline, or `undefined` when it ended in time (or nothing but the
 * headers bound, which is no deadline of the span's own work, bounded it). The deadline is
 * `budget_ms` after the span started, both on the monotonic clock the span's duration is
 * measured on, so no date is parsed per span.
 */
function overranBy(span: Span): number | undefined {
  const { attributes } = span;
  const budget = attributes[ATTR_DEADLINE_BUDGET_MS];
  const source = attributes[ATTR_DEADLINE_SOURCE];
  // A tick span marks its own lateness (tick.ts); a snapshot of work in flight copies a span's attributes.
  if (
    typeof budget !== 'number' ||
    source === 'headers' ||
    attributes[ATTR_HEALTH_TICK] !== undefined ||
    attributes[ATTR_IN_FLIGHT] !== undefined
  )
    return undefined;
  if (budget <= 0) {
    // Started at or after its deadline: the budget (clamped at 0) does not say how late; the deadline does.
    const at = attributes[ATTR_DEADLINE_AT];
    const overdue = typeof at === 'string' ? Math.round(Date.now() - Date.parse(at)) : Number.NaN;
    return overdue > 0 ? overdue : undefined;
  }
  const [seconds, nanos] = span.duration;
  // Whole ms, as budget_ms is rounded: a span ending within half a ms of its deadline did not overrun it.
  const overdue = Math.round(seconds * 1_000 + nanos / 1e6 - budget);
  return overdue > 0 ? overdue : undefined;
}

/** gRPC's status DEADLINE_EXCEEDED, as OpenTelemetry's grpc instrumentation records it. */
const GRPC_DEADLINE_EXCEEDED = 4;

function endedByDeadline(span: Span): boolean {
  if (span.attributes[ATTR_ERROR_TYPE] === DEADLINE_ERROR_CODE) return true;
  // A gRPC call that carried a deadline and ended with DEADLINE_EXCEEDED (either side may end it).
  if (span.attributes['rpc.grpc.status_code'] === GRPC_DEADLINE_EXCEEDED && span.attributes[ATTR_DEADLINE_AT] !== undefined) return true;
  // Instrumentations that record no exception (mongodb's) keep the error's message as the status.
  if (span.status.code === SpanStatusCode.ERROR && span.status.message?.startsWith(DEADLINE_MESSAGE) === true) return true;
  // recordException names the type by the error's `code` when it has one, else by its `name`.
  return span.events.some((event) => {
    const type = event.name === 'exception' ? event.attributes?.['exception.type'] : undefined;
    return type === DEADLINE_ERROR_CODE || type === 'DeadlineExceededError';
  });
}
