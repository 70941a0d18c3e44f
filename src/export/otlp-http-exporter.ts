import {
  OTLPExporterBase,
  OTLPExporterError,
  createOtlpNetworkExportDelegate,
  type ExportResponse,
  type IExporterTransport,
} from '@opentelemetry/otlp-exporter-base';
import {
  convertLegacyHttpOptions,
  createOtlpHttpExporterMetrics,
  type OTLPExporterNodeConfigBase,
} from '@opentelemetry/otlp-exporter-base/node-http';
import { JsonTraceSerializer, ProtobufTraceSerializer, TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import { SendsUnderWay, type AbortableSends } from './abortable-sends.js';

const gzip = promisify(gzipCallback);

const USER_AGENT = 'otel-lifeline';
// A collector's answer is a few bytes (a partial-success message at most); more is not read.
const MAX_RESPONSE_BYTES = 4 * 2 ** 20;
// The OTLP specification's retryable HTTP statuses, and the network errors worth another try.
const RETRYABLE_STATUSES = new Set([429, 502, 503, 504]);
const RETRYABLE_NETWORK_ERRORS = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ENETUNREACH',
  'EHOSTUNREACH',
]);

/**
 * A refused export's error as this transport gives it: `code` is the HTTP status when the collector
 * answered one, and `retryAfterMs` what its `Retry-After` asked for, so the retrier (lifeline's
 * `RetryingExporter`) can honour it.
 */
export class OtlpSendError extends OTLPExporterError {
  constructor(
    message: string,
    code?: number,
    data?: string,
    readonly retryAfterMs?: number,
    /** `false`: another try would fail the same way (a TLS or certificate error, an oversized answer). */
    readonly retryable?: boolean,
  ) {
    super(message, code, data);
  }
}

/** `err` as an error the retrier will not retry, whatever code it carries (a TLS error's is a string). */
function notRetryable(err: unknown): OtlpSendError {
  const error = err instanceof Error ? err : new Error(String(err));
  return Object.assign(new OtlpSendError(error.message, undefined, undefined, undefined, false), { cause: error });
}

/**
 * OTLP/HTTP for traces, as OpenTelemetry's exporters send it (the same `OTEL_EXPORTER_OTLP_*`
 * configuration, serializers and self-observability metrics) with one difference: each export is
 * sent once. OpenTelemetry's HTTP exporters retry inside an export on timers that keep the process
 * alive, up to the whole OTLP timeout (10 s): a process that ended on its own with no collector
 * listening exited ~8 s late. lifeline's `RetryingExporter` retries instead, on timers that do not
 * hold the process, and bounds the flush at the process's end with {@link abortSends}.
 */
export class OtlpHttpTraceExporter extends OTLPExporterBase<ReadableSpan[]> implements AbortableSends {
  readonly #transport: OneShotHttpTransport;

  constructor(encoding: 'protobuf' | 'json', config: OTLPExporterNodeConfigBase = {}) {
    const contentType = encoding === 'protobuf' ? 'application/x-protobuf' : 'application/json';
    // How OpenTelemetry's own HTTP exporters read their options and the OTEL_EXPORTER_OTLP_* env
    // (the replacement of this deprecated function is not exported yet), so both read them alike.
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    const options = convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': contentType });
    const transport = new OneShotHttpTransport(options);
    super(
      createOtlpNetworkExportDelegate(
        options,
        encoding === 'protobuf' ? ProtobufTraceSerializer : JsonTraceSerializer,
        createOtlpHttpExporterMetrics('otlp_http_span_exporter', TraceExporterMetricsHelper, options.url, undefined),
        transport,
      ),
    );
    this.#transport = transport;
  }

  abortSends(): void {
    this.#transport.abort();
  }
}

// eslint-disable-next-line @typescript-eslint/no-deprecated
type HttpOptions = ReturnType<typeof convertLegacyHttpOptions>;

/** One POST per send, no retry; sends under way are kept so that {@link abort} can end them. */
class OneShotHttpTransport implements IExporterTransport {
  readonly #underWay = new SendsUnderWay();
  #client: Promise<{ agent: import('node:http').Agent; request: typeof import('node:http').request }> | undefined;

  constructor(private readonly options: HttpOptions) {}

  async send(data: Uint8Array, timeoutMillis: number): Promise<ExportResponse> {
    // Kept from the start: an abort while the client loads, the headers resolve or the body is
    // compressed ends this send too, before any request is made.
    const send: { aborted: boolean; req?: import('node:http').ClientRequest } = { aborted: false };
    const ended = this.#underWay.add(() => {
      send.aborted = true;
      send.req?.destroy(new OtlpSendError('export ended: the exit flush ran out of time'));
    });
    try {
      const { agent, request } = await (this.#client ??= this.#loadClient().catch((err: unknown) => {
        this.#client = undefined; // the next export tries again
        throw err;
      }));
      const headers: Record<string, string> = { ...(await this.options.headers()) };
      headers['User-Agent'] = this.options.userAgent ? `${this.options.userAgent} ${USER_AGENT}` : USER_AGENT;
      let body = data;
      if (this.options.compression === 'gzip') {
        body = await gzip(data);
        headers['Content-Encoding'] = 'gzip';
      }
      if (send.aborted) return { status: 'retryable', error: new OtlpSendError('export ended: the exit flush ran out of time') };
      return await this.#post(request, agent, headers, body, timeoutMillis, send);
    } catch (err) {
      return { status: 'failure', error: notRetryable(err) };
    } finally {
      ended();
    }
  }

  abort(): void {
    this.#underWay.abortAll();
  }

  shutdown(): void {
    this.abort();
  }

  // http/https are loaded when the first export goes, after the http instrumentation patched them
  // (its exports are then traced as suppressed, as OpenTelemetry's exporters are).
  async #loadClient(): Promise<{ agent: import('node:http').Agent; request: typeof import('node:http').request }> {
    const protocol = new URL(this.options.url).protocol;
    const [agent, { request }] = await Promise.all([
      this.options.agentFactory(protocol),
      protocol === 'http:' ? import('node:http') : import('node:https'),
    ]);
    return { agent, request };
  }

  #post(
    request: typeof import('node:http').request,
    agent: import('node:http').Agent,
    headers: Record<string, string>,
    body: Uint8Array,
    timeoutMillis: number,
    send: { req?: import('node:http').ClientRequest },
  ): Promise<ExportResponse> {
    return new Promise((resolve) => {
      const req = request(new URL(this.options.url), { method: 'POST', headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            res.destroy();
            resolve({
              status: 'failure',
              error: new OtlpSendError(
                `the collector's answer exceeded ${MAX_RESPONSE_BYTES} bytes`,
                undefined,
                undefined,
                undefined,
                false,
              ),
            });
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', (error) => {
          resolve({ status: 'retryable', error });
        });
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            resolve({ status: 'success', data: Buffer.concat(chunks) });
            return;
          }
          const error = new OtlpSendError(
            res.statusMessage ?? `HTTP ${status}`,
            status,
            Buffer.concat(chunks).toString('utf8'),
            retryAfterMs(res.headers['retry-after']),
          );
          resolve(RETRYABLE_STATUSES.has(status) ? { status: 'retryable', error } : { status: 'failure', error });
        });
      });
      send.req = req;
      req.setTimeout(timeoutMillis, () => req.destroy(new OtlpSendError('export timed out')));
      req.on('error', (error: NodeJS.ErrnoException) => {
        const retryable = error instanceof OtlpSendError || RETRYABLE_NETWORK_ERRORS.has(error.code ?? '');
        resolve(retryable ? { status: 'retryable', error } : { status: 'failure', error: notRetryable(error) });
      });
      req.end(body);
    });
  }
}

/** `Retry-After` in ms: seconds, or an HTTP date; `undefined` when absent or unreadable. */
export function retryAfterMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1_000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
