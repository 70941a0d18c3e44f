import type { Client, Metadata, ServiceError } from '@grpc/grpc-js';
import * as grpc from '@grpc/grpc-js';
import {
  OTLPExporterBase,
  createOtlpNetworkExportDelegate,
  type ExportResponse,
  type IExporterTransport,
} from '@opentelemetry/otlp-exporter-base';
import {
  convertLegacyOtlpGrpcOptions,
  createOtlpGrpcExporterMetrics,
  type OTLPGRPCExporterConfigNode,
} from '@opentelemetry/otlp-grpc-exporter-base';
import { ProtobufTraceSerializer, TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { SendsUnderWay, type AbortableSends } from './abortable-sends.js';

const EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
const USER_AGENT = 'otel-lifeline';
// After this many exports in a row end by their deadline, the channel is made anew (a channel
// stuck on a dead connection recovers), as OpenTelemetry's gRPC exporter does.
const MAX_DEADLINES_IN_A_ROW = 5;

type ExportClient = Client & {
  export(
    request: Buffer,
    metadata: Metadata,
    options: grpc.CallOptions,
    callback: (error: ServiceError | null, response?: Buffer) => void,
  ): grpc.ClientUnaryCall;
};

// The encoded request goes as it is: the serializer made the protobuf already.
const ExportClientConstructor = grpc.makeGenericClientConstructor(
  {
    export: {
      path: EXPORT_PATH,
      requestStream: false,
      responseStream: false,
      requestSerialize: (bytes: Buffer) => bytes,
      requestDeserialize: (bytes: Buffer) => bytes,
      responseSerialize: (bytes: Buffer) => bytes,
      responseDeserialize: (bytes: Buffer) => bytes,
    },
  },
  'TraceExportService',
) as unknown as new (address: string, credentials: grpc.ChannelCredentials, options: grpc.ClientOptions) => ExportClient;

/**
 * OTLP/gRPC for traces, as OpenTelemetry's gRPC exporter sends it (the same `OTEL_EXPORTER_OTLP_*`
 * configuration, credentials and metrics), except that its calls under way can be cancelled
 * ({@link abortSends}), so the flush at a process's end keeps to its budget on a collector that
 * never answers. It never retries by itself either: lifeline's `RetryingExporter` does.
 */
export class OtlpGrpcTraceExporter extends OTLPExporterBase<ReadableSpan[]> implements AbortableSends {
  readonly #transport: GrpcTransport;

  constructor(config: OTLPGRPCExporterConfigNode = {}) {
    // How OpenTelemetry's own gRPC exporter reads its options and the OTEL_EXPORTER_OTLP_* env (the
    // replacement of this deprecated function is not exported yet), so both read them alike.
    // eslint-disable-next-line @typescript-eslint/no-deprecated
    const options = convertLegacyOtlpGrpcOptions(config, 'TRACES');
    const transport = new GrpcTransport(options);
    super(
      createOtlpNetworkExportDelegate(
        options,
        ProtobufTraceSerializer,
        createOtlpGrpcExporterMetrics('otlp_grpc_span_exporter', TraceExporterMetricsHelper, options.url, undefined),
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
type GrpcOptions = ReturnType<typeof convertLegacyOtlpGrpcOptions>;

class GrpcTransport implements IExporterTransport {
  readonly #underWay = new SendsUnderWay();
  #client: ExportClient | undefined;
  #metadata: Metadata | undefined;
  #deadlinesInARow = 0;

  constructor(private readonly options: GrpcOptions) {}

  send(data: Uint8Array, timeoutMillis: number): Promise<ExportResponse> {
    let client: ExportClient;
    let metadata: Metadata;
    try {
      metadata = this.#metadata ??= this.options.metadata();
      client = this.#client ??= new ExportClientConstructor(this.options.url, this.options.credentials(), {
        'grpc.default_compression_algorithm':
          this.options.compression === 'gzip' ? grpc.compressionAlgorithms.gzip : grpc.compressionAlgorithms.identity,
        'grpc.use_local_subchannel_pool': 1,
        'grpc.primary_user_agent': this.options.userAgent ? `${this.options.userAgent} ${USER_AGENT}` : USER_AGENT,
      });
    } catch (err) {
      return Promise.resolve({ status: 'failure', error: err instanceof Error ? err : new Error(String(err)) });
    }
    return new Promise((resolve) => {
      let ended = (): void => undefined;
      const call = client.export(Buffer.from(data), metadata, { deadline: Date.now() + timeoutMillis }, (error, response) => {
        ended();
        if (error === null) {
          this.#deadlinesInARow = 0;
          resolve({ status: 'success', ...(response === undefined ? {} : { data: response }) });
          return;
        }
        if (error.code === grpc.status.DEADLINE_EXCEEDED && ++this.#deadlinesInARow > MAX_DEADLINES_IN_A_ROW) this.#renewChannel();
        // The status decides a retry (the retrier reads it); the response says only that it failed.
        resolve({ status: 'failure', error });
      });
      ended = this.#underWay.add(() => {
        call.cancel();
      });
    });
  }

  /** Cancels the calls under way and closes the channel: a connect it was still trying would hold the process. */
  abort(): void {
    this.#underWay.abortAll();
    this.#renewChannel();
  }

  shutdown(): void {
    this.abort();
  }

  #renewChannel(): void {
    this.#client?.close();
    this.#client = undefined;
    this.#deadlinesInARow = 0;
  }
}
