import { propagation, trace } from '@opentelemetry/api';
import { UndiciInstrumentation, type UndiciInstrumentationConfig } from '@opentelemetry/instrumentation-undici';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type IdGenerator, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { DeadlinePropagator } from '../../src/index.js';

/**
 * The real SDK and undici instrumentation as a service would have them, with lifeline's
 * `processors` first and ended spans landing in memory. `start()` registers the globals (tracer
 * provider, deadline propagator) and enables the instrumentation; `stop()` disables it.
 */
export function instrumentedUndici(processors: SpanProcessor[], config: UndiciInstrumentationConfig = {}, idGenerator?: IdGenerator) {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({
    spanProcessors: [...processors, new SimpleSpanProcessor({ exporter })],
    ...(idGenerator === undefined ? {} : { idGenerator }),
  });
  const instrumentation = new UndiciInstrumentation(config);
  return {
    exporter,
    provider,
    start(): void {
      trace.setGlobalTracerProvider(provider);
      propagation.setGlobalPropagator(new DeadlinePropagator());
      instrumentation.setTracerProvider(provider);
      instrumentation.enable();
    },
    stop(): void {
      instrumentation.disable();
    },
  };
}
