import { trace } from '@opentelemetry/api';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import { health as processHealth, startProbeServer, type Health, type Logger, type ProbeServer, type ProbeServerOptions } from '../index.js';

/** Options of {@link startLifeline}. */
export interface LifelineOptions {
  /** `service.name`; default from `OTEL_SERVICE_NAME`. */
  serviceName?: string;
  /** Where spans go; default OTLP configured by the `OTEL_*` env. Batched by the SDK. */
  traceExporter?: SpanExporter;
  /** Span processors, instead of the batched `traceExporter`. */
  spanProcessors?: SpanProcessor[];
  /** More instrumentations to enable beside lifeline's own. */
  instrumentations?: Instrumentation[];
  /** The catalog to serve; default the process-wide `health`. */
  health?: Health;
  /** Probe server options, or `false` for no probe server. */
  probe?: false | Omit<ProbeServerOptions, 'health'>;
  /** Where lifeline logs; default lifeline's pino logger. */
  logger?: Logger;
}

/** A started lifeline: the catalog, its probe server, and the SDK's flush and shutdown. */
export interface Lifeline {
  readonly health: Health;
  /** The probe server, or `undefined` when started with `probe: false`. */
  readonly probe: ProbeServer | undefined;
  /** Exports every ended span now. */
  forceFlush(): Promise<void>;
  /** Closes the probe server and the catalog, flushes and stops the SDK. Idempotent. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry NodeSDK wired with lifeline, the probe server and the catalog
 * (SPEC §3). The SDK registers the global tracer provider and context manager.
 */
export async function startLifeline(options: LifelineOptions = {}): Promise<Lifeline> {
  const health = options.health ?? processHealth;
  const sdk = new NodeSDK({
    ...(options.serviceName === undefined ? {} : { serviceName: options.serviceName }),
    ...(options.traceExporter === undefined ? {} : { traceExporter: options.traceExporter }),
    ...(options.spanProcessors === undefined ? {} : { spanProcessors: options.spanProcessors }),
    instrumentations: options.instrumentations ?? [],
  });
  sdk.start();
  let probe: ProbeServer | undefined;
  try {
    probe = options.probe === false ? undefined : await startProbeServer({ ...options.probe, ...(options.logger ? { logger: options.logger } : {}), health });
  } catch (err) {
    await sdk.shutdown();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    health,
    probe,
    forceFlush: async () => {
      // NodeSDK keeps its tracer provider private; the global proxy hands out the one it registered.
      const provider = trace.getTracerProvider() as { getDelegate?: () => { forceFlush?: () => Promise<void> } };
      await provider.getDelegate?.().forceFlush?.();
    },
    shutdown: () =>
      (stopping ??= (async () => {
        await probe?.close();
        health.close();
        await sdk.shutdown();
      })()),
  };
}
