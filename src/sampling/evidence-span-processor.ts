import { TraceFlags, type Context } from '@opentelemetry/api';
// Types only: the SDK's processors are handed in.
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { numberOption } from '../errors/index.js';
import { isEvidence } from './evidence.js';

/** Options of {@link EvidenceSpanProcessor}. */
export interface EvidenceSpanProcessorOptions {
  /**
   * Ended spans of unsampled traces held in case their trace turns out to be evidence (a span
   * that ends later fails, a verdict snapshots one of its spans in flight); the oldest go first.
   * It bounds the memory: ~1–2 KB a span. Default 2 048.
   */
  maxBufferedSpans?: number;
  /** Traces remembered as evidence, whose spans are exported as they end; the oldest are forgotten first. Default 1 024. */
  maxEvidenceTraces?: number;
}

/**
 * Wraps the processors that export (batch processors, say) so that, besides every sampled span,
 * they export every trace that turned out to be evidence although the sampler dropped it: a trace
 * with a failed span (a call its deadline ended, an error) or a span a verdict found in flight.
 * Use it with {@link EvidenceSampler}, which records the spans the sampler drops: those are held
 * here when they end (at most `maxBufferedSpans`), exported with their trace once it is evidence,
 * and dropped otherwise. Exported spans of such a trace carry the sampled flag.
 *
 * Only this process's spans of the trace are kept: a service it called that sampled the trace out
 * keeps its own evidence only if it runs lifeline too.
 * @example
 * ```ts
 * spanProcessors: [...parts.spanProcessors, new EvidenceSpanProcessor([new BatchSpanProcessor(exporter)])]
 * ```
 */
export class EvidenceSpanProcessor implements SpanProcessor {
  readonly #exporting: readonly SpanProcessor[];
  readonly #maxTraces: number;
  /**
   * Ended spans of unsampled traces not (yet) evidence, in a ring: the newest overwrites the oldest.
   * Holding a span is one store; finding a trace's spans is a scan, paid only when a trace turns
   * out to be evidence (rarely: a failure, a verdict).
   */
  readonly #held: (ReadableSpan | undefined)[];
  #next = 0;
  /** Unsampled traces found to be evidence: their spans are exported as they end. */
  readonly #evidence = new Set<string>();

  constructor(exporting: readonly SpanProcessor[], options: EvidenceSpanProcessorOptions = {}) {
    const { maxBufferedSpans = 2_048, maxEvidenceTraces = 1_024 } = options;
    numberOption('maxBufferedSpans', maxBufferedSpans, { min: 0, max: 1_000_000, integer: true });
    numberOption('maxEvidenceTraces', maxEvidenceTraces, { min: 1, integer: true });
    this.#exporting = [...exporting];
    this.#held = new Array<ReadableSpan | undefined>(maxBufferedSpans);
    this.#maxTraces = maxEvidenceTraces;
  }

  onStart(span: Span, parentContext: Context): void {
    for (const processor of this.#exporting) processor.onStart(span, parentContext);
  }

  onEnding(span: Span): void {
    for (const processor of this.#exporting) processor.onEnding?.(span);
  }

  onEnd(span: ReadableSpan): void {
    const context = span.spanContext();
    if ((context.traceFlags & TraceFlags.SAMPLED) !== 0) {
      // A sampled snapshot of a span in flight: the rest of that (unsampled) trace is evidence too.
      if (isEvidence(span)) this.#keep(context.traceId);
      this.#export(span);
      return;
    }
    if (this.#evidence.has(context.traceId)) {
      this.#export(sampledView(span));
    } else if (isEvidence(span)) {
      this.#keep(context.traceId);
      this.#export(sampledView(span));
    } else {
      this.#hold(span);
    }
  }

  forceFlush(): Promise<void> {
    return Promise.all(this.#exporting.map((processor) => processor.forceFlush())).then(() => undefined);
  }

  shutdown(): Promise<void> {
    this.#held.fill(undefined);
    return Promise.all(this.#exporting.map((processor) => processor.shutdown())).then(() => undefined);
  }

  #export(span: ReadableSpan): void {
    for (const processor of this.#exporting) processor.onEnd(span);
  }

  /** Marks a trace as evidence and exports what is held of it, oldest first. */
  #keep(traceId: string): void {
    if (this.#evidence.has(traceId)) return;
    this.#evidence.add(traceId);
    if (this.#evidence.size > this.#maxTraces) this.#evidence.delete(this.#evidence.values().next().value as string);
    const held = this.#held;
    for (let i = 0; i < held.length; i++) {
      const slot = (this.#next + i) % held.length;
      const span = held[slot];
      if (span?.spanContext().traceId !== traceId) continue;
      held[slot] = undefined;
      this.#export(sampledView(span));
    }
  }

  #hold(span: ReadableSpan): void {
    if (this.#held.length === 0) return;
    this.#held[this.#next] = span;
    this.#next = (this.#next + 1) % this.#held.length;
  }
}

/** The ended span as exporters see it, with the sampled flag: batch processors export only those. */
function sampledView(span: ReadableSpan): ReadableSpan {
  const context = span.spanContext();
  const sampled = { ...context, traceFlags: context.traceFlags | TraceFlags.SAMPLED };
  return {
    name: span.name,
    kind: span.kind,
    spanContext: () => sampled,
    ...(span.parentSpanContext === undefined ? {} : { parentSpanContext: span.parentSpanContext }),
    startTime: span.startTime,
    endTime: span.endTime,
    status: span.status,
    attributes: span.attributes,
    links: span.links,
    events: span.events,
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}
