import type { Context } from '@opentelemetry/api';
// Types only: the core entry depends on the API at run time, never on the SDK.
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { Redactor, type RedactionOptions } from './redactor.js';

/** A verdict's dump: built from redacted snapshots and bounded by its own `maxBytes`. */
const DIAGNOSTIC_PREFIX = 'lifeline.diagnostic.';

/**
 * Redacts secrets from every span once, as it ends and before any exporter sees it: attributes,
 * event attributes (recorded exceptions), the status message and the name. It works in `onEnding`,
 * which the SDK calls for every processor before any processor's `onEnd`, so it may sit anywhere
 * among the span processors: batch and simple processors alike export the redacted span. (A
 * processor of your own that adds attributes in its `onEnding` must come before it.)
 *
 * What it hides, and how to extend it, is {@link otel-lifeline#RedactionOptions}; each value is
 * scanned once, in time linear in its length, and cut at `maxValueLength`.
 *
 * @example
 * ```ts
 * import { DEFAULT_SECRET_WORDS, RedactionSpanProcessor } from 'otel-lifeline/sdk';
 *
 * const sdk = new NodeSDK({
 *   spanProcessors: [
 *     new RedactionSpanProcessor({ queryKeys: [...DEFAULT_SECRET_WORDS, 'tenant'] }),
 *     new BatchSpanProcessor(new OTLPTraceExporter()),
 *   ],
 * });
 * ```
 */
export class RedactionSpanProcessor implements SpanProcessor {
  readonly #redactor: Redactor;

  constructor(options?: RedactionOptions) {
    this.#redactor = new Redactor(options);
  }

  /** Nothing: a span is redacted once, as it ends. */
  onStart(_span: Span, _parentContext: Context): void {
    // Nothing: only ended spans are exported, and values set later would need a second pass.
  }

  /** Redacts the span's attributes, event attributes, status message and name, before any processor's `onEnd`. */
  onEnding(span: Span): void {
    const redactor = this.#redactor;
    const attributes = span.attributes;
    for (const key in attributes) {
      const redacted = redactor.attribute(key, attributes[key]);
      if (redacted !== undefined) span.setAttribute(key, redacted);
    }
    for (const event of span.events) {
      const eventAttributes = event.attributes;
      if (eventAttributes === undefined) continue;
      for (const key in eventAttributes) {
        // Cutting a verdict's dump again at maxValueLength would break its JSON when maxBytes is raised.
        if (key.startsWith(DIAGNOSTIC_PREFIX)) continue;
        const redacted = redactor.attribute(key, eventAttributes[key]);
        if (redacted !== undefined) (eventAttributes as Record<string, unknown>)[key] = redacted;
      }
    }
    const message = span.status.message;
    if (message !== undefined && message !== '') {
      const redacted = redactor.text(message);
      if (redacted !== message) span.setStatus({ code: span.status.code, message: redacted });
    }
    // A name may carry a query without a scheme (`GET /cb?token=…`).
    const name = redactor.text(span.name);
    if (name !== span.name) span.updateName(name);
  }

  /** Nothing: the span was redacted in `onEnding`, while it could still change. */
  onEnd(_span: ReadableSpan): void {
    // Nothing: redacted in onEnding, while the span could still change.
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
