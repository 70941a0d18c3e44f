import { ROOT_CONTEXT, context, createNoopMeter, metrics, type Counter, type MeterProvider } from '@opentelemetry/api';
import type { Logger } from '../log/index.js';

/**
 * Why spans were dropped: the `reason` of the `lifeline.export.dropped` counter. `queue_full`: the
 * batch processor's own queue was full (an export hanging on a blackholed collector holds it);
 * `exit`: not delivered within the flush at the process's natural end.
 */
export type DropReason = 'buffer_full' | 'refused' | 'shutdown' | 'queue_full' | 'exit';

const LOG_INTERVAL_MS = 60_000;

/**
 * Counts dropped spans on the `lifeline.export.dropped` counter and says them in a log line at most
 * once a minute, without losing any: the first drop is said at once, the drops of the quiet minute
 * that follows are summed and said when it ends (and at {@link DropReport.flush}, at shutdown), so
 * the `dropped` of all lines add up to every span dropped.
 */
export class DropReport {
  #total = 0;
  #unsaid = 0;
  #unsaidByReason: Partial<Record<DropReason, number>> = {};
  /** Set while a line was said less than a minute ago. */
  #quiet: NodeJS.Timeout | undefined;
  /** Set by {@link DropReport.hold}: drops are summed, and said at the next flush. */
  #holding = false;
  #provider: MeterProvider | undefined;
  #counter: Counter | undefined;

  /** `kept` tells what is still kept for a retry, for the line. */
  constructor(
    private readonly logger: Logger,
    private readonly kept: () => number = () => 0,
  ) {}

  /** Spans dropped so far. */
  get total(): number {
    return this.#total;
  }

  add(count: number, reason: DropReason): void {
    if (count <= 0) return;
    this.#total += count;
    this.#counterNow().add(count, { reason });
    this.#unsaid += count;
    this.#unsaidByReason[reason] = (this.#unsaidByReason[reason] ?? 0) + count;
    if (this.#quiet === undefined && !this.#holding) this.#say(true);
  }

  /** Sums the drops to come until {@link DropReport.flush}, which says them in one line (the flush at exit). */
  hold(): void {
    this.#holding = true;
  }

  /** Says at once what is not said yet (at shutdown: the process may not live another minute). */
  flush(): void {
    this.#holding = false;
    clearTimeout(this.#quiet);
    this.#quiet = undefined;
    if (this.#unsaid > 0) this.#say(false);
  }

  /** The counter of the global meter provider now: it may be set after this report is made. */
  #counterNow(): Counter {
    const provider = metrics.getMeterProvider();
    if (this.#counter === undefined || provider !== this.#provider) {
      this.#provider = provider;
      this.#counter = provider.getMeter('otel-lifeline').createCounter('lifeline.export.dropped', {
        unit: '{span}',
        description:
          "Spans lifeline dropped before export: buffer full while the collector was unreachable, the batch processor's queue full, refused for good, or still kept at shutdown or at the process's end",
      });
    }
    return this.#counter;
  }

  #say(thenQuiet: boolean): void {
    const fields = { dropped: this.#unsaid, reasons: this.#unsaidByReason, droppedTotal: this.#total, kept: this.kept() };
    this.#unsaid = 0;
    this.#unsaidByReason = {};
    context.with(ROOT_CONTEXT, () => {
      this.logger.warn(
        fields,
        "lifeline: spans dropped: the export buffer or the batch processor's queue was full, the collector refused them, or it could not be reached before the process ended (said at most once a minute, summed)",
      );
    });
    if (!thenQuiet) return;
    this.#quiet = setTimeout(() => {
      this.#quiet = undefined;
      if (this.#unsaid > 0) this.#say(true); // what the quiet minute dropped; then another quiet minute
    }, LOG_INTERVAL_MS);
    this.#quiet.unref(); // a pending line must not keep a finished process alive: shutdown flushes it
  }
}

// The batch processor's self-observability counter, and the `error.type` it gives a span dropped
// for a full queue (OpenTelemetry's semantic conventions for SDK metrics).
const PROCESSED_SPANS = 'otel.sdk.processor.span.processed';
const QUEUE_FULL = 'queue_full';

/**
 * A meter provider for a `BatchSpanProcessor`'s `selfObsMeterProvider` option that passes the
 * spans its queue drops (full) to `drops`; every other instrument is a no-op, as without the option.
 */
export function queueDropsMeterProvider(drops: DropReport): MeterProvider {
  return {
    getMeter: () => {
      const meter = createNoopMeter();
      const noopCounter = meter.createCounter('noop');
      const dropped: Counter = {
        add: (value, attributes) => {
          if (attributes?.['error.type'] === QUEUE_FULL) drops.add(value, 'queue_full');
        },
      };
      meter.createCounter = (name: string) => (name === PROCESSED_SPANS ? dropped : noopCounter);
      return meter;
    },
  };
}
