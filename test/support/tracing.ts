import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { HealthCatalog } from '../../src/index.js';
import { startLifeline, type Lifeline, type LifelineOptions } from '../../src/sdk/index.js';

/** A real SDK tracer provider whose ended spans land in memory, for span-shape assertions. */
export function memoryTracing(processors: SpanProcessor[] = []): { provider: TracerProvider; spans: () => ReadableSpan[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [...processors, new SimpleSpanProcessor({ exporter })] });
  return { provider, spans: () => exporter.getFinishedSpans() };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Keeps the event loop busy, as a stuck synchronous computation would. */
export function blockEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spin
  }
}

/** The first ended client span that `match` accepts, waiting some turns for it (a span ends a few turns after the caller's result). */
export async function endedClientSpan(
  spans: () => ReadableSpan[],
  match: (span: ReadableSpan) => boolean,
): Promise<ReadableSpan | undefined> {
  for (let turn = 0; turn < 50; turn++) {
    const span = spans().find((s) => s.kind === SpanKind.CLIENT && match(s));
    if (span !== undefined) return span;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return undefined;
}

/**
 * `startLifeline` as the in-process tests run it: spans to `exporter` as they end, a catalog of
 * the test's own, no probe server, SIGTERM left alone; `options` adds the rest.
 */
export function startInMemoryLifeline(exporter: InMemorySpanExporter, options: LifelineOptions = {}): Promise<Lifeline> {
  return startLifeline({
    spanProcessors: [new SimpleSpanProcessor({ exporter })],
    health: new HealthCatalog(),
    probe: false,
    handleSigterm: false,
    ...options,
  });
}
