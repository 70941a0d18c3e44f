import { ROOT_CONTEXT, context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { correctedEnv } from '../config/index.js';
import type { Logger } from '../log/index.js';
import { canAbortSends, type AbortableSends } from './abortable-sends.js';

/**
 * Passes every call on to `exporter`, and says so once when spans stop reaching it (a collector
 * that is not running, a wrong endpoint) and once when they reach it again. Without it, the OTLP
 * exporters drop spans silently and a new user sees an empty Jaeger with no clue why.
 */
export class ExportWarningExporter implements SpanExporter, AbortableSends {
  #failing = false;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly logger: Logger,
    private readonly destination: string,
  ) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.exporter.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS && !this.#failing) {
        this.#failing = true;
        const fields = { destination: this.destination, err: result.error?.message ?? 'export failed', spans: spans.length };
        // Outside any span: the line is about lifeline, not about the request that happened to be active.
        context.with(ROOT_CONTEXT, () => {
          this.logger.warn(
            fields,
            'lifeline: spans cannot be exported and are dropped; is the collector running? (said once, until an export succeeds again)',
          );
        });
      } else if (result.code === ExportResultCode.SUCCESS && this.#failing) {
        this.#failing = false;
        context.with(ROOT_CONTEXT, () => {
          this.logger.info({ destination: this.destination }, 'lifeline: spans are exported again');
        });
      }
      resultCallback(result);
    });
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }

  abortSends(): void {
    if (canAbortSends(this.exporter)) this.exporter.abortSends();
  }
}

/** Where the env-configured OTLP exporter sends traces (after lifeline's corrections), for the warning above. */
export function otlpDestination(given: NodeJS.ProcessEnv = process.env): string {
  const env = correctedEnv(given);
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (traces) return traces;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const grpc = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim() === 'grpc';
  if (base) return grpc ? base : `${base.replace(/\/$/, '')}/v1/traces`;
  return grpc ? 'http://localhost:4317' : 'http://localhost:4318/v1/traces';
}
