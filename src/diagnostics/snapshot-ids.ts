// Types only: the core entry depends on the API at run time, never on the SDK.
import type { IdGenerator } from '@opentelemetry/sdk-trace';

/**
 * The tracer provider's ID generator, able to put one root span into a trace of lifeline's
 * choosing. A snapshot of a stuck tick is exported while the real tick span has not ended (it may
 * never end); made a root in the tick's own trace, it gives that trace a root span Jaeger can show
 * (a child of the unexported tick span would have a parent Jaeger never receives). The OpenTelemetry
 * API has no other way to start a root span in an existing trace.
 *
 * `startLifeline` (and register mode) install it. With an SDK of your own, pass
 * `parts.idGenerator` as the `idGenerator` of your `NodeSDK` for the same; without it each stuck
 * tick's snapshot is a trace of its own, linked to the verdict.
 */
export class SnapshotIdGenerator implements IdGenerator {
  readonly #ids: IdGenerator;
  #nextTraceId: string | undefined;

  /** @param ids - the generator of every other ID (the SDK's `RandomIdGenerator`). */
  constructor(ids: IdGenerator) {
    this.#ids = ids;
  }

  /** The trace ID {@link SnapshotIdGenerator.inTrace} chose, for the root span started in it; else a new one from `ids`. */
  generateTraceId(): string {
    const chosen = this.#nextTraceId;
    if (chosen === undefined) return this.#ids.generateTraceId();
    this.#nextTraceId = undefined;
    return chosen;
  }

  /** A new span ID from `ids`. */
  generateSpanId(): string {
    return this.#ids.generateSpanId();
  }

  /** Runs `start`, whose root span (if this generator is the provider's) joins trace `traceId`. */
  inTrace<T>(traceId: string, start: () => T): T {
    this.#nextTraceId = traceId;
    try {
      return start();
    } finally {
      this.#nextTraceId = undefined;
    }
  }
}
