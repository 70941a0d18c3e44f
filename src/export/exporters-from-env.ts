import { BatchSpanProcessor, ConsoleSpanExporter, type SpanExporter } from '@opentelemetry/sdk-trace';
import { correctedEnv, envCorrections, warnEnvCorrections, withCorrectedEnv } from '../config/index.js';
import { LifelineError } from '../errors/index.js';
import { loggerOrDefault, type Logger } from '../log/index.js';
import { queueDropsMeterProvider } from './drop-report.js';
import { RetryingExporter } from './retrying-exporter.js';

/**
 * The span exporters `OTEL_TRACES_EXPORTER` names (default `otlp`, protocol from
 * `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`, default `http/protobuf`). NodeSDK does the same, but only
 * when it also owns every span processor; lifeline needs its own processors beside the exporter's.
 * The OTLP exporters read their endpoint, headers and timeout from the `OTEL_*` env themselves; they
 * are made with the env lifeline corrected (`withCorrectedEnv`), so a bad endpoint or timeout is
 * replaced by what lifeline's warning says, whatever the exporter would have made of it.
 * Only the exporter asked for is loaded: an unused gRPC exporter (and grpc-js with it) costs nothing.
 */
export async function traceExportersFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<SpanExporter[]> {
  const names = (env.OTEL_TRACES_EXPORTER ?? 'otlp')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.includes('none')) return [];
  const invalid = names.find((name) => name !== 'console' && name !== 'otlp');
  if (invalid !== undefined)
    throw new LifelineError(
      'ERR_INVALID_OPTION',
      `invalid OTEL_TRACES_EXPORTER=${JSON.stringify(env.OTEL_TRACES_EXPORTER)} (lifeline supports otlp, console and none)`,
    );
  return Promise.all(names.map((name) => (name === 'console' ? Promise.resolve(new ConsoleSpanExporter()) : otlpExporter(env))));
}

async function otlpExporter(env: NodeJS.ProcessEnv): Promise<SpanExporter> {
  const variable =
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL === undefined ? 'OTEL_EXPORTER_OTLP_PROTOCOL' : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
  const protocol = (env[variable] ?? 'http/protobuf').trim();
  switch (protocol) {
    case 'http/protobuf':
    case 'http/json': {
      // lifeline's own OTLP exporters: one attempt per export (RetryingExporter retries), and
      // sends that can be ended, so the flush at a process's end keeps to its budget.
      const { OtlpHttpTraceExporter } = await import('./otlp-http-exporter.js');
      return withCorrectedEnv(() => new OtlpHttpTraceExporter(protocol === 'http/protobuf' ? 'protobuf' : 'json'));
    }
    case 'grpc': {
      const { OtlpGrpcTraceExporter } = await import('./otlp-grpc-exporter.js');
      return withCorrectedEnv(() => new OtlpGrpcTraceExporter());
    }
    default:
      throw new LifelineError(
        'ERR_INVALID_OPTION',
        `invalid ${variable}=${JSON.stringify(protocol)} (expected http/protobuf, http/json or grpc)`,
      );
  }
}

/** The `OTEL_BSP_*` tuning every batch processor gets; `undefined` leaves the SDK's default. */
export interface BatchTuning {
  maxQueueSize?: number;
  maxExportBatchSize?: number;
  scheduledDelayMillis?: number;
  exportTimeoutMillis?: number;
}

const DEFAULT_QUEUE_SIZE = 2048;
const DEFAULT_BATCH_SIZE = 512;

/**
 * `OTEL_BSP_*` as the OpenTelemetry SDK's configuration rules have them (the rules: `envCorrections`):
 * sizes are integers >= 1, the batch at most the queue, delay and timeout integers of ms within a
 * timer's range. A bad value is warned about (naming the variable, once in the process) and the
 * default used instead, as the SDK does, never passed on.
 */
export function batchTuningFromEnv(env: NodeJS.ProcessEnv = process.env, logger: Logger = loggerOrDefault(undefined)): BatchTuning {
  warnEnvCorrections(
    logger,
    envCorrections(env).filter((correction) => correction.variable.startsWith('OTEL_BSP_')),
  );
  const corrected = correctedEnv(env);
  const read = (name: string): number | undefined => {
    const value = corrected[name]?.trim();
    return value === undefined || value === '' ? undefined : Number(value);
  };
  const maxQueueSize = read('OTEL_BSP_MAX_QUEUE_SIZE');
  let maxExportBatchSize = read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  // The default batch is capped by a smaller queue, as the SDK's processor itself would.
  const queue = maxQueueSize ?? DEFAULT_QUEUE_SIZE;
  if (maxExportBatchSize === undefined && queue < DEFAULT_BATCH_SIZE) maxExportBatchSize = queue;
  const tuning: Record<keyof BatchTuning, number | undefined> = {
    maxQueueSize,
    maxExportBatchSize,
    scheduledDelayMillis: read('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: read('OTEL_BSP_EXPORT_TIMEOUT'),
  };
  return Object.fromEntries(Object.entries(tuning).filter(([, value]) => value !== undefined));
}

/**
 * A batch processor for `exporter` tuned by `tuning` (from {@link batchTuningFromEnv}), as NodeSDK
 * would build it. In front of a {@link RetryingExporter}, the spans the processor drops because its
 * queue is full (`maxQueueSize`; an export hanging on a blackholed collector holds the queue) are
 * counted and said with the exporter's own drops (`reason` `queue_full`): the processor reports them
 * on its self-observability meter provider (its public, experimental `selfObsMeterProvider` option),
 * which lifeline gives it for that alone.
 */
export function batchProcessorFromEnv(exporter: SpanExporter, tuning: BatchTuning = batchTuningFromEnv()): BatchSpanProcessor {
  if (!(exporter instanceof RetryingExporter)) return new BatchSpanProcessor({ exporter, ...tuning });
  return new BatchSpanProcessor({ exporter, ...tuning, selfObsMeterProvider: queueDropsMeterProvider(exporter.drops) });
}
