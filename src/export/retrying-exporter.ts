import { ROOT_CONTEXT, context, metrics } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { numberOption } from '../errors/index.js';
import type { Logger } from '../log/index.js';

/** How spans the collector refused are kept and sent again (`startLifeline`'s `exportBuffer`). */
export interface RetryOptions {
  /** Spans kept for a retry at most; beyond it the oldest are dropped (and counted). Default 2 048. */
  maxSpans?: number;
  /**
   * Bytes kept for a retry at most, as estimated from each span's name, attributes, events and
   * links (what dominates its encoded size); beyond it the oldest are dropped. Default 16 MiB.
   */
  maxBytes?: number;
  /** First retry delay, doubled after each failure. Default 500 ms. */
  initialBackoffMs?: number;
  /** Longest retry delay. Default 30 000 ms. */
  maxBackoffMs?: number;
}

// HTTP statuses worth another try (the OTLP specification's list); no status at all means the
// collector was not reached (refused, reset, timed out): worth another try too.
const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
const DROP_LOG_INTERVAL_MS = 60_000;

/** Why spans were dropped: the `reason` of the `lifeline.export.dropped` counter. */
type DropReason = 'buffer_full' | 'refused' | 'shutdown';

/**
 * Keeps batches the collector did not take and sends them again, in order, with backoff, so that
 * a collector restarting for a few seconds costs no span. The OTLP exporters drop a batch at the
 * first refused connection. The buffer is bounded by spans and by bytes: past either the oldest go,
 * counted on the `lifeline.export.dropped` counter (by `reason`; with the global meter provider,
 * e.g. `OTEL_METRICS_EXPORTER=otlp`) and in a log line at most once a minute. The batch processor
 * is told every batch succeeded once buffered, so it keeps its own queue moving.
 */
export class RetryingExporter implements SpanExporter {
  readonly #pending: { spans: ReadableSpan[]; bytes: number }[] = [];
  #pendingSpans = 0;
  #pendingBytes = 0;
  #dropped = 0;
  #droppedLogged = 0;
  #lastDropLog = 0;
  #backoffMs: number;
  #timer: NodeJS.Timeout | undefined;
  #sending: Promise<void> | undefined;
  /** The batch being sent, while it is. */
  #sendingBatch: ReadableSpan[] | undefined;
  readonly #maxSpans: number;
  readonly #maxBytes: number;
  readonly #initialBackoffMs: number;
  readonly #maxBackoffMs: number;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly logger: Logger,
    options: RetryOptions = {},
  ) {
    this.#maxSpans = options.maxSpans ?? 2_048;
    this.#maxBytes = options.maxBytes ?? 16 * 2 ** 20;
    for (const [name, value] of [
      ['maxSpans', this.#maxSpans],
      ['maxBytes', this.#maxBytes],
    ] as const) {
      numberOption(`exportBuffer.${name}`, value, { min: 1, integer: true });
    }
    this.#initialBackoffMs = options.initialBackoffMs ?? 500;
    this.#maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.#backoffMs = this.#initialBackoffMs;
  }

  /** Spans dropped so far because the buffer was full or the collector refused them for good. */
  get dropped(): number {
    return this.#dropped;
  }

  /** What is kept for a retry now: spans and their estimated bytes. */
  get buffered(): { spans: number; bytes: number } {
    return { spans: this.#pendingSpans, bytes: this.#pendingBytes };
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.#pending.length > 0) {
      // Older spans wait for a retry: these go behind them, in order.
      this.#keep(spans);
      resultCallback({ code: ExportResultCode.SUCCESS });
      return;
    }
    this.exporter.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) {
        if (retryable(result)) {
          this.#keep(spans);
          this.#schedule();
        } else {
          this.#drop(spans.length, 'refused');
        }
      }
      resultCallback({ code: ExportResultCode.SUCCESS });
    });
  }

  /** Sends what is kept once (no waiting between batches), then flushes the exporter. */
  async forceFlush(): Promise<void> {
    await this.#drain(false);
    await this.exporter.forceFlush?.();
  }

  async shutdown(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#drain(false);
    this.#drop(this.#pendingSpans, 'shutdown'); // what the collector would still not take at the very end
    this.#pending.length = 0;
    this.#pendingSpans = 0;
    this.#pendingBytes = 0;
    await this.exporter.shutdown();
  }

  #keep(spans: ReadableSpan[]): void {
    const bytes = spans.reduce((sum, span) => sum + spanBytes(span), 0);
    this.#pending.push({ spans, bytes });
    this.#pendingSpans += spans.length;
    this.#pendingBytes += bytes;
    while ((this.#pendingSpans > this.#maxSpans || this.#pendingBytes > this.#maxBytes) && this.#pending.length > 0) {
      const evicted = this.#shift().spans;
      // The batch on its way out is counted once its send is known to have failed: it may yet arrive.
      if (evicted !== this.#sendingBatch) this.#drop(evicted.length, 'buffer_full');
    }
  }

  #shift(): { spans: ReadableSpan[]; bytes: number } {
    const oldest = this.#pending.shift() ?? { spans: [], bytes: 0 };
    this.#pendingSpans -= oldest.spans.length;
    this.#pendingBytes -= oldest.bytes;
    return oldest;
  }

  #drop(count: number, reason: DropReason): void {
    if (count === 0) return;
    this.#dropped += count;
    // Looked up at each drop (rare): the global meter provider may be set after this exporter is made.
    metrics
      .getMeter('otel-lifeline')
      .createCounter('lifeline.export.dropped', {
        unit: '{span}',
        description:
          'Spans lifeline dropped before export: buffer full while the collector was unreachable, refused for good, or still kept at shutdown',
      })
      .add(count, { reason });
    const now = Date.now();
    if (now - this.#lastDropLog < DROP_LOG_INTERVAL_MS) return;
    this.#lastDropLog = now;
    const fields = { dropped: this.#dropped - this.#droppedLogged, droppedTotal: this.#dropped, kept: this.#pendingSpans };
    this.#droppedLogged = this.#dropped;
    context.with(ROOT_CONTEXT, () => {
      this.logger.warn(fields, 'lifeline: spans dropped: the export buffer is full or the collector refused them');
    });
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#sending !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#drain(true);
    }, this.#backoffMs);
    this.#timer.unref(); // a retry must not keep a finished process alive
    this.#backoffMs = Math.min(this.#backoffMs * 2, this.#maxBackoffMs);
  }

  /** Sends the kept batches in order until one fails; `reschedule` arms the next retry then. */
  #drain(reschedule: boolean): Promise<void> {
    this.#sending ??= (async () => {
      while (this.#pending.length > 0) {
        const batch = this.#pending[0]?.spans ?? [];
        this.#sendingBatch = batch;
        const result = await new Promise<ExportResult>((resolve) => {
          this.exporter.export(batch, resolve);
        });
        this.#sendingBatch = undefined;
        const delivered = result.code === ExportResultCode.SUCCESS;
        // A full buffer may have dropped this very batch while it was being sent: then it is not the head.
        const evicted = this.#pending[0]?.spans !== batch;
        if (!delivered && retryable(result)) {
          if (evicted) this.#drop(batch.length, 'buffer_full');
          break;
        }
        if (delivered) this.#backoffMs = this.#initialBackoffMs;
        else this.#drop(batch.length, 'refused');
        if (!evicted) this.#shift();
      }
    })().finally(() => {
      this.#sending = undefined;
      if (reschedule && this.#pending.length > 0) this.#schedule();
    });
    return this.#sending;
  }
}

function retryable(result: ExportResult): boolean {
  const code = (result.error as { code?: unknown } | undefined)?.code;
  return typeof code !== 'number' || RETRYABLE_STATUS.has(code);
}

// Fixed cost of a span beyond its strings: ids, timestamps, kind, status, resource and scope refs.
const SPAN_OVERHEAD_BYTES = 128;

/** A span's size as its strings and numbers make it: enough to bound memory, cheaper than encoding. */
export function spanBytes(span: ReadableSpan): number {
  let bytes = SPAN_OVERHEAD_BYTES + span.name.length + attributesBytes(span.attributes);
  for (const event of span.events) bytes += event.name.length + 16 + attributesBytes(event.attributes);
  for (const link of span.links) bytes += 64 + attributesBytes(link.attributes);
  return bytes;
}

function attributesBytes(attributes: ReadableSpan['attributes'] | undefined): number {
  let bytes = 0;
  for (const key in attributes) bytes += key.length + valueBytes(attributes[key]);
  return bytes;
}

function valueBytes(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (Array.isArray(value)) return value.reduce((sum: number, item: unknown) => sum + valueBytes(item), 0);
  return 8;
}
