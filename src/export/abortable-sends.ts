/**
 * An exporter whose sends under way can be ended at once, so that the flush at the process's end
 * keeps to its budget (see `RetryingExporter.flushAtExit`). Decorators pass it on.
 */
export interface AbortableSends {
  /** Ends every send under way now; each reports a retryable failure. */
  abortSends(): void;
}

/** Whether `exporter` can end its sends under way. */
export function canAbortSends(exporter: unknown): exporter is AbortableSends {
  return typeof (exporter as Partial<AbortableSends> | undefined)?.abortSends === 'function';
}

/** The sends of a transport that are under way, each with the way to end it. */
export class SendsUnderWay {
  readonly #aborts = new Set<() => void>();

  /** Keeps `abort` until the returned function is called (when the send ends). */
  add(abort: () => void): () => void {
    this.#aborts.add(abort);
    return () => this.#aborts.delete(abort);
  }

  abortAll(): void {
    for (const abort of [...this.#aborts]) abort();
  }
}
