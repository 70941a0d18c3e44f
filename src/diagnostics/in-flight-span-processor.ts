import type { IncomingMessage } from 'node:http';
import { SpanStatusCode, type Context } from '@opentelemetry/api';
// Types only: the core entry depends on the API at run time, never on the SDK.
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { numberOption, oneOf } from '../errors/index.js';
import { ATTR_HEALTH_COMPONENT } from '../semconv/index.js';
import { Redactor, type RedactionOptions } from '../redaction/index.js';
import { captureStack, frameLocation, userFrames } from './stacks.js';
import { deadlineOf } from '../deadline/index.js';

/** Which spans get a creation stack: none, those of tick work (default), or all. */
export type CaptureStacks = 'off' | 'ticks' | 'all';

/** Options of {@link InFlightSpanProcessor}. */
export interface InFlightSpanProcessorOptions {
  /** Spans tracked at most; when full the oldest is evicted (and counted). Default 10 000. */
  maxSpans?: number;
  /**
   * Creation-stack text held at most, in bytes (characters; frames are ASCII paths); beyond it the
   * oldest spans are evicted (and counted), so spans that are never ended cannot grow memory
   * without bound. Default 8 MiB (about 5,000 stacks of 12 frames).
   */
  maxStackBytes?: number;
  /** Default `'ticks'`: spans in a tick's trace, where stuck work matters. */
  captureStacks?: CaptureStacks;
  /**
   * How what it shows is redacted: in-flight spans in a verdict's dump (they have not ended, so no
   * `RedactionSpanProcessor` has seen them yet) and the `code.stacktrace` it records. Give the
   * redaction processor the same options. See {@link RedactionOptions}.
   */
  redact?: RedactionOptions;
}

/** A span that started and has not ended yet. */
export interface TrackedSpan {
  readonly span: Span;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  /** Epoch ms. */
  readonly startMs: number;
  /** The user's frames where it started, one per line, when `captureStacks` wanted them. */
  readonly stack: string | undefined;
  /** @internal Its deadline, epoch ms: the context's at its start, then the one its `lifeline.deadline.at` says; a cache for the stuck-work rounds. */
  deadlineAt: number | undefined;
  /** @internal The `lifeline.deadline.at` text {@link TrackedSpan.deadlineAt} was read from. */
  deadlineText: string | undefined;
  /** @internal What the stuck-work caps count it by, once it was stuck (its route is known by then). */
  route: string | undefined;
  /** @internal A server span's request, for naming its handler when it is exported stuck. */
  request: IncomingMessage | undefined;
  /**
   * @internal Its parent, while both are in flight (tracked): a round tells a stuck ancestor
   * without a lookup. Cleared when this span ends, so a chain of ended spans is never held.
   */
  parent: TrackedSpan | undefined;
  /** @internal The last stuck-work round ({@link InFlightSpanProcessor.nextRound}) that found it stuck or below a stuck span. */
  stuckRound: number;
  /** @internal Its snapshot, once exported (by a verdict or as stuck work), when, and by whom (a tracker may serve several). */
  remembered: { readonly by: object; readonly again: boolean | undefined; readonly at: number | undefined } | undefined;
}

/**
 * Tracks started-but-not-ended spans so that an unhealthy verdict can show where work is stuck:
 * OpenTelemetry exports spans only when they end, and a stuck call never ends. A failed span with
 * a creation stack gets `code.*` attributes naming the user's function that started it.
 * Redacting the spans that are exported is `RedactionSpanProcessor`'s job.
 */
export class InFlightSpanProcessor implements SpanProcessor {
  readonly #maxSpans: number;
  readonly #maxStackBytes: number;
  readonly #captureStacks: CaptureStacks;
  /** Inside {@link InFlightSpanProcessor.untracked}: spans started now are not tracked. */
  #untracked = 0;
  readonly #redactor: Redactor;
  readonly #spans = new Map<string, TrackedSpan>();
  /** Traces rooted at a tick span still in flight: their spans are "tick work". */
  readonly #tickTraces = new Map<string, number>();
  #evicted = 0;
  #stackBytes = 0;
  #rounds = 0;

  constructor(options: InFlightSpanProcessorOptions = {}) {
    const { maxSpans = 10_000, maxStackBytes = 8 * 1024 * 1024, captureStacks = 'ticks', redact } = options;
    numberOption('maxSpans', maxSpans, { min: 1, integer: true });
    numberOption('maxStackBytes', maxStackBytes, { min: 1, integer: true });
    this.#maxSpans = maxSpans;
    this.#maxStackBytes = maxStackBytes;
    this.#captureStacks = oneOf('captureStacks', captureStacks, ['off', 'ticks', 'all']);
    this.#redactor = new Redactor(redact);
  }

  /** @internal The redactor this processor applies, for dumps built from its spans. */
  get redactor(): Redactor {
    return this.#redactor;
  }

  /** Spans dropped because the tracker was full (maxSpans or maxStackBytes), since it was created. */
  get evicted(): number {
    return this.#evicted;
  }

  /** Spans currently tracked. */
  get size(): number {
    return this.#spans.size;
  }

  /** @internal One in-flight span by id. */
  get(spanId: string): TrackedSpan | undefined {
    return this.#spans.get(spanId);
  }

  /** @internal A number no stuck-work round over these spans had before (the rounds mark spans with it). */
  nextRound(): number {
    return ++this.#rounds;
  }

  /** @internal Every in-flight span, oldest first. */
  all(): TrackedSpan[] {
    return [...this.#spans.values()];
  }

  /** @internal Whether `traceId` is rooted at a tick still in flight (a component's work). */
  isTickWork(traceId: string): boolean {
    return this.#tickTraces.size !== 0 && this.#tickTraces.has(traceId);
  }

  /** @internal Notes the request a server span serves (from the http instrumentation's request hook). */
  attachRequest(span: { spanContext(): { spanId: string } }, request: IncomingMessage): void {
    const tracked = this.#spans.get(span.spanContext().spanId);
    if (tracked !== undefined) tracked.request = request;
  }

  /** @internal The in-flight spans of one trace, oldest first. */
  spansOf(traceId: string): TrackedSpan[] {
    const result: TrackedSpan[] = [];
    for (const tracked of this.#spans.values()) if (tracked.traceId === traceId) result.push(tracked);
    return result;
  }

  /** Starts tracking the span, with its creation stack when `captureStacks` wants it; when full, evicts the oldest. */
  onStart(span: Span, parentContext: Context): void {
    if (this.#untracked > 0) return;
    const { traceId, spanId } = span.spanContext();
    const isTick = span.attributes[ATTR_HEALTH_COMPONENT] !== undefined;
    if (isTick) this.#tickTraces.set(traceId, (this.#tickTraces.get(traceId) ?? 0) + 1);
    const wantStack = this.#captureStacks === 'all' || (this.#captureStacks === 'ticks' && this.#tickTraces.has(traceId));
    const stack = wantStack ? captureStack() : undefined;
    const parentSpanId = span.parentSpanContext?.spanId;
    // The deadline the span starts under, as DeadlineSpanProcessor records it (a headers bound is none).
    const deadline = deadlineOf(parentContext);
    const bound = deadline === undefined || deadline.source === 'headers' ? undefined : deadline;
    this.#spans.set(spanId, {
      span,
      traceId,
      spanId,
      parentSpanId,
      startMs: span.startTime[0] * 1_000 + span.startTime[1] / 1e6,
      stack,
      deadlineAt: bound?.at,
      // The very text DeadlineSpanProcessor records (formatted once per deadline): a round compares it, never parses it.
      deadlineText: bound?.atText,
      route: undefined,
      request: undefined,
      parent: parentSpanId === undefined ? undefined : this.#spans.get(parentSpanId),
      stuckRound: 0,
      remembered: undefined,
    });
    this.#stackBytes += stack?.length ?? 0;
    // Oldest first (a Map iterates in insertion order): the newest is the likeliest to be live work.
    while (this.#spans.size > this.#maxSpans || this.#stackBytes > this.#maxStackBytes) {
      const oldest = this.#spans.keys().next().value;
      if (oldest === undefined) break;
      this.#forget(oldest);
      this.#evicted++;
    }
  }

  /** Gives a failed span (status ERROR) with a creation stack the `code.*` attributes of the user's function that started it. */
  onEnding(span: Span): void {
    // A failed call (one its deadline aborted, above all) says which of the user's functions made
    // it: its error's own stack holds only timers and sockets. Only failures pay for the attributes.
    if (span.status.code === SpanStatusCode.ERROR) {
      try {
        this.#recordCaller(span);
      } catch {
        // A frame that is not a path (an odd file URL): the span ends without code.*, never with a throw into span.end().
      }
    }
  }

  /**
   * @internal Runs `start`, whose spans are not tracked: a verdict's own spans (its snapshots,
   * their stacks) are not work in flight, and must not push the stuck spans they show out of a
   * full tracker.
   */
  untracked<T>(start: () => T): T {
    this.#untracked++;
    try {
      return start();
    } finally {
      this.#untracked--;
    }
  }

  /** `code.*` attributes from the span's creation stack, as the semantic conventions name them. */
  #recordCaller(span: Span): void {
    const frames = userFrames(this.#spans.get(span.spanContext().spanId)?.stack);
    const caller = frames.map(frameLocation).find((location) => location !== undefined);
    if (caller === undefined || span.attributes['code.function.name'] !== undefined) return;
    if (caller.function !== undefined) span.setAttribute('code.function.name', caller.function);
    span.setAttribute('code.file.path', caller.file);
    span.setAttribute('code.line.number', caller.line);
    span.setAttribute('code.column.number', caller.column);
    span.setAttribute('code.stacktrace', this.#redactor.text(frames.join('\n')));
  }

  /** Stops tracking the span: it is no longer in flight. */
  onEnd(span: ReadableSpan): void {
    this.#forget(span.spanContext().spanId);
  }

  /** Nothing to flush (it exports nothing): resolves at once. */
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  /** Forgets every tracked span. */
  shutdown(): Promise<void> {
    this.#spans.clear();
    this.#tickTraces.clear();
    this.#stackBytes = 0;
    return Promise.resolve();
  }

  #forget(spanId: string): void {
    const tracked = this.#spans.get(spanId);
    if (tracked === undefined) return;
    this.#spans.delete(spanId);
    this.#stackBytes -= tracked.stack?.length ?? 0;
    // A child still in flight may hold it: not what it held in turn (a long chain of ended work, a request).
    tracked.parent = undefined;
    tracked.request = undefined;
    if (tracked.span.attributes[ATTR_HEALTH_COMPONENT] === undefined) return;
    const left = (this.#tickTraces.get(tracked.traceId) ?? 1) - 1;
    if (left > 0) this.#tickTraces.set(tracked.traceId, left);
    else this.#tickTraces.delete(tracked.traceId);
  }
}
