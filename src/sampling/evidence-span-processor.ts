import { TraceFlags, type Context } from '@opentelemetry/api';
// Types only: the SDK's processors are handed in.
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { numberOption } from '../errors/index.js';
import { ATTR_IN_FLIGHT } from '../semconv/index.js';
import { isEvidence } from './evidence.js';
import { spanHeapBytes } from './span-heap-bytes.js';

/** Options of {@link EvidenceSpanProcessor}. */
export interface EvidenceSpanProcessorOptions {
  /**
   * Ended spans of unsampled traces held in case their trace turns out to be evidence (a span
   * that ends later fails, a verdict snapshots one of its spans in flight); the oldest go first.
   * Default 2 048.
   */
  maxBufferedSpans?: number;
  /**
   * The most heap those held spans may take; past it the oldest go first. Default 8 MiB. A span
   * is counted as V8 holds it: ~0.9 KiB of its own (context, ids, times, status), its name, and
   * each attribute, event and link with its strings (1 byte a char, 2 for text past U+00FF),
   * numbers, arrays and V8's slot for it (8 bytes an attribute, 48 past 16 in a span); the
   * resource and instrumentation scope are shared by every span and not counted. Measured within
   * 0.8–1.25× of the heap it takes (120 small attributes, few large ones, events, links).
   */
  maxBufferedBytes?: number;
  /**
   * Traces remembered as evidence, whose spans are exported as they end; the one least recently
   * heard of is forgotten first (its spans that end later are held again, as routine). Default 1 024.
   */
  maxEvidenceTraces?: number;
}

/**
 * Wraps the processors that export (batch processors, say) so that, besides every sampled span,
 * they export every trace that turned out to be evidence although the sampler dropped it: a trace
 * with a failed span (a call its deadline ended, an error) or a span a verdict found in flight.
 * Use it with {@link EvidenceSampler}, which records the spans the sampler drops: those are held
 * here when they end (at most `maxBufferedSpans` and `maxBufferedBytes`), exported with their
 * trace once it is evidence, and dropped otherwise. Exported spans of such a trace reach the
 * wrapped processors' `onEnd` as a copy that carries the sampled flag.
 *
 * Only this process's spans of the trace are kept: a service it called that sampled the trace out
 * keeps its own evidence only if it runs lifeline too.
 * @example
 * ```ts
 * spanProcessors: [...parts.spanProcessors, new EvidenceSpanProcessor([new BatchSpanProcessor({ exporter })])]
 * ```
 */
export class EvidenceSpanProcessor implements SpanProcessor {
  readonly #exporting: readonly SpanProcessor[];
  readonly #maxTraces: number;
  /**
   * Ended spans of unsampled traces not (yet) evidence, in a ring: the newest overwrites the oldest.
   * Holding a span is a store and a size estimate; finding a trace's spans is a scan, paid only
   * when a trace turns out to be evidence (rarely: a failure, a verdict).
   */
  readonly #held: (ReadableSpan | undefined)[];
  /** The estimated bytes of each held span, by slot. */
  readonly #sizes: number[];
  readonly #maxBytes: number;
  #heldBytes = 0;
  #next = 0;
  /**
   * Where the oldest held span may be: the slots from here to #next hold every held span (and
   * holes a trace kept as evidence left). Evicting for bytes starts here, not at #next + 1, which
   * would walk every empty slot of a buffer the byte bound keeps part full, on every span.
   */
  #oldest = 0;
  /** Unsampled traces found to be evidence, least recently heard of first: their spans are exported as they end. */
  readonly #evidence = new Set<string>();

  constructor(exporting: readonly SpanProcessor[], options: EvidenceSpanProcessorOptions = {}) {
    const { maxBufferedSpans = 2_048, maxBufferedBytes = 8 * 1024 * 1024, maxEvidenceTraces = 1_024 } = options;
    numberOption('maxBufferedSpans', maxBufferedSpans, { min: 0, max: 1_000_000, integer: true });
    numberOption('maxBufferedBytes', maxBufferedBytes, { min: 0, integer: true });
    numberOption('maxEvidenceTraces', maxEvidenceTraces, { min: 1, integer: true });
    this.#exporting = [...exporting];
    this.#held = new Array<ReadableSpan | undefined>(maxBufferedSpans);
    this.#sizes = new Array<number>(maxBufferedSpans).fill(0);
    this.#maxBytes = maxBufferedBytes;
    this.#maxTraces = maxEvidenceTraces;
  }

  /** Passes the span to each wrapped processor's `onStart`. */
  onStart(span: Span, parentContext: Context): void {
    for (const processor of this.#exporting) processor.onStart(span, parentContext);
  }

  /** Passes the span to each wrapped processor's `onEnding`. */
  onEnding(span: Span): void {
    for (const processor of this.#exporting) processor.onEnding?.(span);
  }

  /**
   * Exports the span (hands it to the wrapped processors' `onEnd`) if it is sampled or its trace is
   * evidence, with the trace's held spans when this span makes it evidence; else holds it.
   */
  onEnd(span: ReadableSpan): void {
    const context = span.spanContext();
    if ((context.traceFlags & TraceFlags.SAMPLED) !== 0) {
      // A sampled snapshot of a span in flight, rooted in the stuck (unsampled) trace: that trace is evidence.
      if (span.attributes[ATTR_IN_FLIGHT] !== undefined) this.#keep(context.traceId);
      this.#export(span);
      return;
    }
    if (this.#evidence.has(context.traceId)) {
      this.#heardOf(context.traceId);
      this.#export(sampledView(span));
    } else if (isEvidence(span)) {
      this.#keep(context.traceId);
      this.#export(sampledView(span));
    } else {
      this.#hold(span);
    }
  }

  /** Flushes the wrapped processors; held spans stay held (their traces are not evidence). */
  forceFlush(): Promise<void> {
    return Promise.all(this.#exporting.map((processor) => processor.forceFlush())).then(() => undefined);
  }

  /** Drops the held spans and shuts the wrapped processors down. */
  shutdown(): Promise<void> {
    this.#held.fill(undefined);
    this.#heldBytes = 0;
    this.#oldest = this.#next;
    return Promise.all(this.#exporting.map((processor) => processor.shutdown())).then(() => undefined);
  }

  #export(span: ReadableSpan): void {
    for (const processor of this.#exporting) processor.onEnd(span);
  }

  /** Marks a trace as evidence and exports what is held of it, oldest first. */
  #keep(traceId: string): void {
    if (this.#evidence.has(traceId)) {
      this.#heardOf(traceId);
      return;
    }
    this.#evidence.add(traceId);
    if (this.#evidence.size > this.#maxTraces) this.#evidence.delete(this.#evidence.values().next().value as string);
    const held = this.#held;
    for (let i = 0; i < held.length; i++) {
      const slot = (this.#next + i) % held.length;
      const span = held[slot];
      if (span?.spanContext().traceId !== traceId) continue;
      this.#release(slot);
      this.#export(sampledView(span));
    }
  }

  /** Keeps an evidence trace remembered longest: the one least recently heard of is forgotten first. */
  #heardOf(traceId: string): void {
    this.#evidence.delete(traceId);
    this.#evidence.add(traceId);
  }

  #hold(span: ReadableSpan): void {
    const slots = this.#held.length;
    if (slots === 0) return;
    const bytes = spanHeapBytes(span);
    if (bytes > this.#maxBytes) return; // more than the whole buffer: never held
    if (this.#held[this.#next] !== undefined) {
      this.#release(this.#next); // the ring is full: the oldest, overwritten; the next oldest follows it
      this.#oldest = (this.#next + 1) % slots;
    }
    // Ends: a span of at most #maxBytes only fails to fit while something is held.
    while (this.#heldBytes + bytes > this.#maxBytes) {
      this.#release(this.#oldest);
      this.#oldest = (this.#oldest + 1) % slots;
    }
    this.#held[this.#next] = span;
    this.#sizes[this.#next] = bytes;
    this.#heldBytes += bytes;
    this.#next = (this.#next + 1) % slots;
  }

  #release(slot: number): void {
    if (this.#held[slot] === undefined) return;
    this.#held[slot] = undefined;
    this.#heldBytes -= this.#sizes[slot] ?? 0;
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
