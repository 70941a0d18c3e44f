import { BatchSpanProcessor, ConsoleSpanExporter, type SpanExporter } from '@opentelemetry/sdk-trace';
import { LifelineError } from '../errors/index.js';

/**
 * The span exporters `OTEL_TRACES_EXPORTER` names (default `otlp`, protocol from
 * `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`, default `http/protobuf`). NodeSDK does the same, but only
 * when it also owns every span processor; lifeline needs its own processors beside the exporter's.
 * The OTLP exporters read their endpoint, headers and timeout from the `OTEL_*` env themselves.
 * Only the exporter asked for is loaded: an unused gRPC exporter (and grpc-js with it) costs nothing.
 */
export async function traceExportersFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<SpanExporter[]> {
  const names = (env.OTEL_TRACES_EXPORTER ?? 'otlp')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.includes('none')) return [];
  const invalid = names.find((name) => name !== 'console' && name !== 'otlp');
  if (invalid !== undefined) throw new LifelineError('ERR_INVALID_OPTION', `invalid OTEL_TRACES_EXPORTER=${JSON.stringify(env.OTEL_TRACES_EXPORTER)} (lifeline supports otlp, console and none)`);
  return Promise.all(names.map((name) => (name === 'console' ? Promise.resolve(new ConsoleSpanExporter()) : otlpExporter(env))));
}

async function otlpExporter(env: NodeJS.ProcessEnv): Promise<SpanExporter> {
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL === undefined ? 'OTEL_EXPORTER_OTLP_PROTOCOL' : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
  const protocol = (env[variable] ?? 'http/protobuf').trim();
  switch (protocol) {
    case 'http/protobuf':
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
    case 'http/json':
      return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
    case 'grpc':
      return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
    default:
      throw new LifelineError('ERR_INVALID_OPTION', `invalid ${variable}=${JSON.stringify(protocol)} (expected http/protobuf, http/json or grpc)`);
  }
}

/** A batch processor for `exporter` tuned by `OTEL_BSP_*`, as NodeSDK would build it. */
export function batchProcessorFromEnv(exporter: SpanExporter, env: NodeJS.ProcessEnv = process.env): BatchSpanProcessor {
  const tuning = {
    maxQueueSize: count(env, 'OTEL_BSP_MAX_QUEUE_SIZE'),
    scheduledDelayMillis: count(env, 'OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: count(env, 'OTEL_BSP_EXPORT_TIMEOUT'),
    maxExportBatchSize: count(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
  };
  return new BatchSpanProcessor({ exporter, ...Object.fromEntries(Object.entries(tuning).filter(([, value]) => value !== undefined)) });
}

function count(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new LifelineError('ERR_INVALID_OPTION', `invalid ${name}=${JSON.stringify(raw)} (expected a number >= 0)`);
  return value;
}
