import { OTLPTraceExporter as OTLPGrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as OTLPJsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OTLPProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor, ConsoleSpanExporter, type SpanExporter } from '@opentelemetry/sdk-trace';
import { LifelineError } from '../errors/index.js';

/**
 * The span exporters `OTEL_TRACES_EXPORTER` names (default `otlp`, protocol from
 * `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`, default `http/protobuf`). NodeSDK does the same, but only
 * when it also owns every span processor; lifeline needs its own processors beside the exporter's.
 * The OTLP exporters read their endpoint, headers and timeout from the `OTEL_*` env themselves.
 */
export function traceExportersFromEnv(env: NodeJS.ProcessEnv = process.env): SpanExporter[] {
  const names = (env.OTEL_TRACES_EXPORTER ?? 'otlp')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.includes('none')) return [];
  return names.map((name) => {
    if (name === 'console') return new ConsoleSpanExporter();
    if (name === 'otlp') return otlpExporter(env);
    throw new LifelineError('ERR_INVALID_OPTION', `invalid OTEL_TRACES_EXPORTER=${JSON.stringify(env.OTEL_TRACES_EXPORTER)} (lifeline supports otlp, console and none)`);
  });
}

function otlpExporter(env: NodeJS.ProcessEnv): SpanExporter {
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL === undefined ? 'OTEL_EXPORTER_OTLP_PROTOCOL' : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
  const protocol = (env[variable] ?? 'http/protobuf').trim();
  switch (protocol) {
    case 'http/protobuf':
      return new OTLPProtoTraceExporter();
    case 'http/json':
      return new OTLPJsonTraceExporter();
    case 'grpc':
      return new OTLPGrpcTraceExporter();
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
