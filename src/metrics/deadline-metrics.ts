import { metrics, SpanKind, type Context, type Counter, type MeterProvider } from '@opentelemetry/api';
// Types only: the core entry depends on the API at run time, never on the SDK.
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import type { DeadlineSource } from '../deadline/index.js';
import { numberOption } from '../errors/index.js';
import {
  ATTR_DEADLINE_EXCEEDED,
  ATTR_DEADLINE_OVERDUE_MS,
  ATTR_DEADLINE_MISSING,
  ATTR_DEADLINE_SOURCE,
  ATTR_IN_FLIGHT,
  METRIC_DEADLINE_EXCEEDED,
  METRIC_DEADLINE_MISSING,
  OTHER_ADDRESSES,
  SCOPE_NAME,
} from '../semconv/index.js';

/** Options of {@link DeadlineMetricsSpanProcessor}. */
export interface DeadlineMetricsOptions {
  /** Where the counters are made; default the global meter provider, looked up again when it changes. */
  meterProvider?: MeterProvider;
  /** Distinct `server.address` values counted apart, per counter; later ones are counted as `_OTHER`. Default 100. */
  maxServerAddresses?: number;
}

/**
 * Counts, from the spans lifeline's `DeadlineSpanProcessor` marks, the calls a deadline ended
 * (`lifeline.deadline.exceeded`, by `server.address` and `lifeline.deadline.source`; ticks and
 * servers too, without an address) and the client calls nothing bounded (`lifeline.deadline.missing`,
 * by `server.address`). It counts every recorded span, sampled or not: under head sampling the
 * counts stay whole, where metrics derived from exported spans would see 1 %.
 * @example `spanProcessors: [new DeadlineSpanProcessor(), new DeadlineMetricsSpanProcessor(), …]`
 */
export class DeadlineMetricsSpanProcessor implements SpanProcessor {
  readonly #given: MeterProvider | undefined;
  readonly #maxAddresses: number;
  /** Addresses counted apart, per counter: a server span's comes from its caller's Host header. */
  readonly #exceededAddresses = new Set<string>();
  readonly #missingAddresses = new Set<string>();
  #provider: MeterProvider | undefined;
  #exceeded: Counter | undefined;
  #missing: Counter | undefined;

  constructor(options: DeadlineMetricsOptions = {}) {
    const { maxServerAddresses = 100 } = options;
    numberOption('maxServerAddresses', maxServerAddresses, { min: 0, max: 100_000, integer: true });
    this.#given = options.meterProvider;
    this.#maxAddresses = maxServerAddresses;
  }

  /** Nothing: a span is counted when it ends. */
  onStart(_span: Span, _parentContext: Context): void {
    // Counted once the span ends: only then is it known to have run out of time.
  }

  /**
   * Counts the span in `lifeline.deadline.exceeded` if its deadline ended it, or in
   * `lifeline.deadline.missing` if it is a client span nothing bounded.
   */
  onEnd(span: ReadableSpan): void {
    const attributes = span.attributes;
    // A verdict's snapshot of work in flight copies its attributes: the real span counts when it ends.
    if (attributes[ATTR_IN_FLIGHT] !== undefined) return;
    const address = attributes['server.address'] ?? attributes['net.peer.name'];
    // Ended by a deadline; a span that overran it (`overdue_ms`) was not ended by it.
    if (attributes[ATTR_DEADLINE_EXCEEDED] === true && attributes[ATTR_DEADLINE_OVERDUE_MS] === undefined) {
      this.#counters().exceeded.add(1, {
        ...bounded(this.#exceededAddresses, this.#maxAddresses, address),
        [ATTR_DEADLINE_SOURCE]: sourceOf(attributes[ATTR_DEADLINE_SOURCE]),
      });
    } else if (span.kind === SpanKind.CLIENT && attributes[ATTR_DEADLINE_MISSING] === true) {
      this.#counters().missing.add(1, bounded(this.#missingAddresses, this.#maxAddresses, address));
    }
  }

  /** Nothing to flush: the meter provider exports the counts. Resolves at once. */
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  /** Nothing to release (the meter provider is shut down by its owner): resolves at once. */
  shutdown(): Promise<void> {
    return Promise.resolve();
  }

  /** The counters of the current meter provider: the global one may be set after this processor is made. */
  #counters(): { exceeded: Counter; missing: Counter } {
    const provider = this.#given ?? metrics.getMeterProvider();
    if (provider !== this.#provider || this.#exceeded === undefined || this.#missing === undefined) {
      const meter = provider.getMeter(SCOPE_NAME);
      this.#provider = provider;
      this.#exceeded = meter.createCounter(METRIC_DEADLINE_EXCEEDED, {
        unit: '{call}',
        description: 'Calls, ticks and requests a deadline ended',
      });
      this.#missing = meter.createCounter(METRIC_DEADLINE_MISSING, {
        unit: '{call}',
        description: 'Client calls made with no deadline at all',
      });
    }
    return { exceeded: this.#exceeded, missing: this.#missing };
  }
}

/** One of lifeline's few deadline sources; anything else (set by hand) as `unknown`, keeping the series bounded. */
function sourceOf(value: unknown): string {
  return typeof value === 'string' && Object.hasOwn(SOURCES, value) ? value : 'unknown';
}
// A record, so the compiler checks it names every DeadlineSource and nothing else.
const SOURCES: Readonly<Record<DeadlineSource, true>> = { tick: true, inbound: true, scope: true, policy: true, headers: true };

/** `server.address`, at most `max` distinct values in `seen` (then `_OTHER`); none for a span without one. */
function bounded(seen: Set<string>, max: number, value: unknown): { 'server.address'?: string } {
  if (typeof value !== 'string') return {};
  if (seen.has(value)) return { 'server.address': value };
  if (seen.size >= max) return { 'server.address': OTHER_ADDRESSES };
  seen.add(value);
  return { 'server.address': value };
}
