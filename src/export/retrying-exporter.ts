import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { SETTINGS, settingOption } from '../settings/index.js';
import type { Logger } from '../log/index.js';
import { DropReport, type DropReason } from './drop-report.js';
import { canAbortSends } from './abortable-sends.js';
import { retryAdvice } from './retry-advice.js';

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

// Each retry delay is the backoff times a random factor in [1 - JITTER, 1 + JITTER], as the OTLP
// exporters' own retries do (and gRPC's connection backoff), so that a fleet does not retry in
// lockstep after a collector restart. A delay the collector asks for (gRPC RetryInfo) is waited if
// longer, at most maxBackoffMs.
const JITTER = 0.2;

/**
 * Keeps batches the collector did not take and sends them again, in order, with backoff, so that
 * a collector restarting for a few seconds costs no span. The OTLP exporters drop a batch at the
 * first refused connection. Retries wait a jittered, doubling backoff, or what the collector asked
 * for (gRPC RetryInfo; at most `maxBackoffMs`). The buffer is bounded by spans and by bytes: past
 * either the oldest go, counted on the `lifeline.export.dropped` counter (by `reason`; with the
 * global meter provider, e.g. `OTEL_METRICS_EXPORTER=otlp`) and in a log line at most once a minute
 * that sums every drop since the last ({@link DropReport}). The batch processor is told every batch
 * succeeded once buffered, so it keeps its own queue moving.
 */
export class RetryingExporter implements SpanExporter {
  readonly #pending: { spans: ReadableSpan[]; bytes: number }[] = [];
  #pendingSpans = 0;
  #pendingBytes = 0;
  readonly #drops: DropReport;
  #backoffMs: number;
  /** The delay the collector asked for at the last refusal, if it did. */
  #retryAfterMs: number | undefined;
  #shutDown = false;
  /** Set during {@link flushAtExit}: `sending` while its budget lasts, `over` once it ran out. */
  #exiting: 'sending' | 'over' | undefined;
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
    logger: Logger,
    options: RetryOptions = {},
  ) {
    this.#maxSpans = options.maxSpans ?? 2_048;
    this.#maxBytes = options.maxBytes ?? 16 * 2 ** 20;
    settingOption(SETTINGS.exportBufferSpans, this.#maxSpans);
    settingOption(SETTINGS.exportBufferBytes, this.#maxBytes);
    this.#initialBackoffMs = options.initialBackoffMs ?? 500;
    this.#maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.#backoffMs = this.#initialBackoffMs;
    this.#drops = new DropReport(logger, () => this.#pendingSpans);
  }

  /**
   * Spans dropped so far: the buffer was full, the collector refused them for good, they were still
   * kept at shutdown, or (with {@link batchProcessorFromEnv}) the batch processor's queue was full.
   */
  get dropped(): number {
    return this.#drops.total;
  }

  /** Where drops are counted and said; a batch processor in front of this exporter reports its own there too. */
  get drops(): DropReport {
    return this.#drops;
  }

  /** What is kept for a retry now: spans and their estimated bytes. */
  get buffered(): { spans: number; bytes: number } {
    return { spans: this.#pendingSpans, bytes: this.#pendingBytes };
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.#exiting === 'over') {
      this.#drop(spans.length, 'exit'); // the exit flush's budget is spent: nothing more is sent
      resultCallback({ code: ExportResultCode.SUCCESS });
      return;
    }
    if (this.#pending.length > 0) {
      // Older spans wait for a retry: these go behind them, in order.
      this.#keep(spans);
      resultCallback({ code: ExportResultCode.SUCCESS });
      return;
    }
    this.exporter.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) {
        const advice = retryAdvice(result);
        if (advice.retryable && this.#exiting !== undefined) {
          this.#drop(spans.length, 'exit'); // no retry will come: the process is ending
        } else if (advice.retryable && this.#shutDown) {
          // An export that was under way at shutdown: no retry will come, so the loss is said.
          this.#drop(spans.length, 'shutdown');
          this.#drops.flush();
        } else if (advice.retryable) {
          this.#keep(spans);
          this.#retryAfterMs = advice.afterMs;
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
    await this.#drain();
    await this.exporter.forceFlush?.();
  }

  /**
   * Runs `flush` (the tracer provider's, which exports through this exporter) at the process's
   * natural end, within `budgetMs`: batches are sent once each, in order, until one fails (no retry
   * would come before the process exits); sends still under way when the budget runs out are ended (when the exporter can
   * end them: `AbortableSends`) and later batches are not sent; whatever was not delivered,
   * kept batches included, is dropped (reason `exit`) and said at once, in one line. A collector
   * that refuses connections costs the process nothing, a blackholed one `budgetMs`.
   */
  async flushAtExit(flush: () => Promise<void>, budgetMs: number): Promise<void> {
    if (this.#shutDown) return flush();
    this.#exiting = 'sending';
    this.#drops.hold(); // one line for the whole flush, however many batches it drops
    clearTimeout(this.#timer); // the retry comes now, within the budget, or never
    this.#timer = undefined;
    const budget = setTimeout(() => {
      this.#exiting = 'over';
      if (canAbortSends(this.exporter)) this.exporter.abortSends();
    }, budgetMs);
    budget.unref(); // what holds the process is the sends; the budget only ends them
    try {
      await flush();
      if (this.#budgetLeft()) await this.#drain();
      else await this.#sending;
    } finally {
      if (this.#sending !== undefined) {
        // The flush failed with a send under way: it ends first, so its batch is counted once, here.
        this.#exiting = 'over';
        if (canAbortSends(this.exporter)) this.exporter.abortSends();
        await this.#sending.catch(() => undefined);
      }
      clearTimeout(budget);
      this.#exiting = undefined;
      this.#drop(this.#pendingSpans, 'exit');
      this.#pending.length = 0;
      this.#pendingSpans = 0;
      this.#pendingBytes = 0;
      this.#drops.flush();
    }
  }

  /** Whether the exit flush still may send (a method: the budget's timer changes it between awaits). */
  #budgetLeft(): boolean {
    return this.#exiting === 'sending';
  }

  async shutdown(): Promise<void> {
    this.#shutDown = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#drain();
    this.#drop(this.#pendingSpans, 'shutdown'); // what the collector would still not take at the very end
    this.#pending.length = 0;
    this.#pendingSpans = 0;
    this.#pendingBytes = 0;
    this.#drops.flush(); // the drops of the last quiet minute, said before the process ends
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
    this.#drops.add(count, reason);
  }

  /**
   * Arms the next retry: after the jittered backoff, or after what the collector asked for if it
   * did (never sooner than the backoff's jittered floor, never later than `maxBackoffMs`).
   */
  #schedule(): void {
    if (this.#timer !== undefined || this.#sending !== undefined || this.#shutDown || this.#exiting !== undefined) return;
    const jittered = this.#backoffMs * (1 + (Math.random() * 2 - 1) * JITTER);
    const delay = Math.min(Math.max(jittered, this.#retryAfterMs ?? 0), this.#maxBackoffMs);
    this.#retryAfterMs = undefined;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#drain();
    }, delay);
    this.#timer.unref(); // a retry must not keep a finished process alive
    this.#backoffMs = Math.min(this.#backoffMs * 2, this.#maxBackoffMs);
  }

  /**
   * Sends the kept batches in order until one fails, then arms the next retry, whoever started the
   * send (a retry timer that fires during a `forceFlush` joins its send, and must not be lost with it).
   */
  #drain(): Promise<void> {
    this.#sending ??= (async () => {
      while (this.#pending.length > 0 && this.#exiting !== 'over') {
        const batch = this.#pending[0]?.spans ?? [];
        this.#sendingBatch = batch;
        const result = await new Promise<ExportResult>((resolve) => {
          this.exporter.export(batch, resolve);
        });
        this.#sendingBatch = undefined;
        const delivered = result.code === ExportResultCode.SUCCESS;
        // A full buffer may have dropped this very batch while it was being sent: then it is not the head.
        const evicted = this.#pending[0]?.spans !== batch;
        const advice = delivered ? undefined : retryAdvice(result);
        if (advice?.retryable === true) {
          if (evicted) this.#drop(batch.length, 'buffer_full');
          this.#retryAfterMs = advice.afterMs;
          break;
        }
        if (delivered) this.#backoffMs = this.#initialBackoffMs;
        else this.#drop(batch.length, 'refused');
        if (!evicted) this.#shift();
      }
    })().finally(() => {
      this.#sending = undefined;
      if (this.#pending.length > 0) this.#schedule();
    });
    return this.#sending;
  }
}

/**
 * How long the flush at a process's natural end may send: a collector that answers (a TLS handshake
 * over a 200 ms round trip included) is done well within it; a blackholed one costs no more.
 */
export const EXIT_FLUSH_BUDGET_MS = 750;

/** Runs `flush` once, within the exit budget of every one of `exporters` (see {@link RetryingExporter.flushAtExit}). */
export function flushAtExit(
  exporters: readonly RetryingExporter[],
  flush: () => Promise<void>,
  budgetMs = EXIT_FLUSH_BUDGET_MS,
): Promise<void> {
  return exporters.reduceRight<() => Promise<void>>((inner, exporter) => () => exporter.flushAtExit(inner, budgetMs), flush)();
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
