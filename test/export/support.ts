import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace';
import type { Logger } from '../../src/log/index.js';

/** A logger that keeps its warnings (fields and message). */
export function warnings(): { logger: Logger; lines: { fields: Record<string, unknown>; msg: string }[] } {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  const ignore = (): void => undefined;
  return {
    lines,
    logger: { warn: (fields, msg) => lines.push({ fields: fields as Record<string, unknown>, msg }), info: ignore, debug: ignore },
  };
}

/** `n` ended spans named `prefix-i`, not exported anywhere. */
export function endedSpans(prefix: string, n: number): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] });
  for (let i = 0; i < n; i++)
    provider
      .getTracer('t')
      .startSpan(`${prefix}-${String(i)}`)
      .end();
  return memory.getFinishedSpans();
}

/** What a collector that is not listening makes the OTLP/HTTP exporter answer. */
export const REFUSED: ExportResult = {
  code: ExportResultCode.FAILED,
  error: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:4318'), { code: 'ECONNREFUSED' }),
};

/**
 * A collector in process: answers each export with `answer` (at once), or, while `answer` is
 * `'hold'`, keeps the export unanswered until {@link FakeCollector.release}. Records when each
 * export came (`Date.now()`, fake under fake timers).
 */
export class FakeCollector implements SpanExporter {
  readonly calls: { at: number; names: string[] }[] = [];
  readonly #held: ((result: ExportResult) => void)[] = [];

  constructor(public answer: ExportResult | 'hold') {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.calls.push({ at: Date.now(), names: spans.map((span) => span.name) });
    if (this.answer === 'hold') this.#held.push(resultCallback);
    else resultCallback(this.answer);
  }

  /** Answers the held exports with `result`. */
  release(result: ExportResult): void {
    for (const callback of this.#held.splice(0)) callback(result);
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Exports `spans` through `exporter`, resolving with the result it gives. */
export function exportThrough(exporter: SpanExporter, spans: ReadableSpan[]): Promise<ExportResult> {
  return new Promise((resolve) => {
    exporter.export(spans, resolve);
  });
}
