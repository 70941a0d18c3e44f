import { ROOT_CONTEXT, context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import type { Logger } from '../index.js';

/** Options of {@link RetryingExporter}. */
export interface RetryOptions {
  /** Spans kept for a retry at most; beyond it the oldest are dropped (and counted). Default 2 048. */
  maxSpans?: number;
  /** First retry delay, doubled after each failure. Default 500 ms. */
  initialBackoffMs?: number;
  /** Longest retry delay. Default 30 000 ms. */
  maxBackoffMs?: number;
}

// HTTP statuses worth another try (the OTLP specification's list); no status at all means the
// collector was not reached (refused, reset, timed out): worth another try too.
const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
const DROP_LOG_INTERVAL_MS = 60_000;

/**
 * Keeps batches the collector did not take and sends them again, in order, with backoff, so that
 * a collector restarting for a few seconds costs no span. The OTLP exporters drop a batch at the
 * first refused connection. The buffer is bounded by spans: past it the oldest go, counted, with a
 * log line at most once a minute. The batch processor is told every batch succeeded once buffered,
 * so it keeps its own queue moving.
 */
export class RetryingExporter implements SpanExporter {
  readonly #pending: ReadableSpan[][] = [];
  #pendingSpans = 0;
  #dropped = 0;
  #droppedLogged = 0;
  #lastDropLog = 0;
  #backoffMs: number;
  #timer: NodeJS.Timeout | undefined;
  #sending: Promise<void> | undefined;
  readonly #maxSpans: number;
  readonly #initialBackoffMs: number;
  readonly #maxBackoffMs: number;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly logger: Logger,
    options: RetryOptions = {},
  ) {
    this.#maxSpans = options.maxSpans ?? 2_048;
    this.#initialBackoffMs = options.initialBackoffMs ?? 500;
    this.#maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.#backoffMs = this.#initialBackoffMs;
  }

  /** Spans dropped so far because the buffer was full or the collector refused them for good. */
  get dropped(): number {
    return this.#dropped;
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
          this.#drop(spans.length);
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
    this.#drop(this.#pendingSpans); // what the collector would still not take at the very end
    this.#pending.length = 0;
    this.#pendingSpans = 0;
    await this.exporter.shutdown();
  }

  #keep(spans: ReadableSpan[]): void {
    this.#pending.push(spans);
    this.#pendingSpans += spans.length;
    while (this.#pendingSpans > this.#maxSpans && this.#pending.length > 0) {
      const oldest = this.#pending.shift() ?? [];
      this.#pendingSpans -= oldest.length;
      this.#drop(oldest.length);
    }
  }

  #drop(count: number): void {
    if (count === 0) return;
    this.#dropped += count;
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
        const batch = this.#pending[0] ?? [];
        const result = await new Promise<ExportResult>((resolve) => {
          this.exporter.export(batch, resolve);
        });
        if (result.code !== ExportResultCode.SUCCESS && retryable(result)) break;
        this.#pending.shift();
        this.#pendingSpans -= batch.length;
        if (result.code !== ExportResultCode.SUCCESS) this.#drop(batch.length);
        else this.#backoffMs = this.#initialBackoffMs;
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
