import { propagation, trace } from '@opentelemetry/api';
import { UndiciInstrumentation, type UndiciInstrumentationConfig } from '@opentelemetry/instrumentation-undici';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
  type IdGenerator,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { DeadlinePropagator } from '../../src/index.js';

/**
 * The real SDK and undici instrumentation as a service would have them, with lifeline's
 * `processors` first and ended spans landing in memory (through `sampling.wrapExport`, when given). `start()` registers the globals (tracer
 * provider, deadline propagator) and enables the instrumentation; `stop()` disables it.
 */
export function instrumentedUndici(
  processors: SpanProcessor[],
  config: UndiciInstrumentationConfig = {},
  idGenerator?: IdGenerator,
  sampling: { sampler?: Sampler; wrapExport?: (exporting: SpanProcessor[]) => SpanProcessor } = {},
) {
  const exporter = new InMemorySpanExporter();
  const exporting = [new SimpleSpanProcessor({ exporter })];
  const provider = new TracerProvider({
    spanProcessors: [...processors, ...(sampling.wrapExport === undefined ? exporting : [sampling.wrapExport(exporting)])],
    ...(idGenerator === undefined ? {} : { idGenerator }),
    ...(sampling.sampler === undefined ? {} : { sampler: sampling.sampler }),
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
