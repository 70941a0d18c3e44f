import { trace } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation, type HttpInstrumentationConfig } from '@opentelemetry/instrumentation-http';
import { PinoInstrumentation } from '@opentelemetry/instrumentation-pino';
import { UndiciInstrumentation, type UndiciInstrumentationConfig } from '@opentelemetry/instrumentation-undici';
import { NodeSDK, type NodeSDKConfiguration } from '@opentelemetry/sdk-node';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { invalidOption } from '../errors/index.js';
import { policyDeadlineOf } from '../http/index.js';
import { recordDeadline } from '../processors/index.js';
import {
  LifelineError,
  DeadlinePropagator,
  DeadlineSpanProcessor,
  Diagnostics,
  InFlightSpanProcessor,
  health as processHealth,
  installDeadlineDispatcher,
  installHttpDeadlines,
  startProbeServer,
  type DeadlineDispatcherOptions,
  type DeadlinePropagatorOptions,
  type DiagnosticsOptions,
  type Health,
  type InFlightSpanProcessorOptions,
  type InstalledDeadlineDispatcher,
  type InstalledHttpDeadlines,
  type Logger,
  type ProbeServer,
  type ProbeServerOptions,
} from '../index.js';
import { batchProcessorFromEnv, traceExportersFromEnv } from './exporters-from-env.js';
import { GrpcDeadlineInstrumentation } from './grpc-deadline-instrumentation.js';

// Required, not imported: see the probe server (an ES import of node:http sets a global).
const http = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/** Options of {@link startLifeline}. */
export interface LifelineOptions {
  /** `service.name`; default from `OTEL_SERVICE_NAME`. */
  serviceName?: string;
  /** Where spans go, batched; default the exporters `OTEL_TRACES_EXPORTER` names (OTLP). */
  traceExporter?: SpanExporter;
  /** Span processors to use instead of the batched `traceExporter`; lifeline's own run first. */
  spanProcessors?: SpanProcessor[];
  /** More instrumentations beside lifeline's (undici/fetch, http, pino). */
  instrumentations?: Instrumentation[];
  /** Configuration of lifeline's undici/fetch instrumentation (e.g. `headersToSpanAttributes`). */
  undici?: UndiciInstrumentationConfig;
  /** Configuration of lifeline's http instrumentation; probe requests stay untraced. */
  http?: HttpInstrumentationConfig;
  /** The catalog to serve; default the process-wide `health`. */
  health?: Health;
  /** Probe server options, or `false` for no probe server. */
  probe?: false | Omit<ProbeServerOptions, 'health'>;
  /** Where lifeline logs; default lifeline's pino logger. */
  logger?: Logger;
  /**
   * Deadline policy of every outgoing call — Node's `fetch` and undici (the global dispatcher),
   * node:http/https (axios, got, …) and gRPC — or `false` to bound none of them.
   */
  deadlines?: false | DeadlineDispatcherOptions;
  /** Options of the inbound/outbound deadline header. */
  propagation?: DeadlinePropagatorOptions;
  /** How unhealthy verdicts explain themselves: in-flight tracking, stacks, rate limit, caps, redaction. */
  diagnostics?: Omit<DiagnosticsOptions, 'inFlight' | 'tracerProvider' | 'logger'> & InFlightSpanProcessorOptions;
  /**
   * On SIGTERM: readiness fails at once, liveness stays up, spans are flushed; then, if the app has
   * no SIGTERM handler of its own, lifeline shuts down and exits. `false` leaves SIGTERM alone.
   * Default true.
   */
  handleSigterm?: boolean;
  /** The most a SIGTERM flush or shutdown may take before the process exits anyway. Default 5 000 ms. */
  shutdownTimeoutMs?: number;
}

/** A started lifeline: the catalog, its probe server, and the SDK's flush and shutdown. */
export interface Lifeline {
  readonly health: Health;
  /** The probe server, or `undefined` when started with `probe: false`. */
  readonly probe: ProbeServer | undefined;
  /** Exports every ended span now. */
  forceFlush(): Promise<void>;
  /** Closes the probe server and the catalog, restores the global dispatcher, flushes and stops the SDK. Idempotent. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry NodeSDK wired with everything lifeline has: deadline span
 * attributes, the deadline header beside W3C trace context and baggage, undici/fetch and http
 * instrumentation (probe requests untraced), the deadline dispatcher, the probe server and the
 * catalog. The SDK registers the global tracer provider, propagator and context manager.
 */
export async function startLifeline(options: LifelineOptions = {}): Promise<Lifeline> {
  // A second SDK would fight the first over the globals (and both would wait on the other's SIGTERM).
  if (running) throw new LifelineError('ERR_ALREADY_STARTED', 'lifeline is already started in this process (once shut down, it can start again only with a catalog of its own)');
  const { shutdownTimeoutMs } = options;
  if (shutdownTimeoutMs !== undefined && !(typeof shutdownTimeoutMs === 'number' && shutdownTimeoutMs > 0 && shutdownTimeoutMs <= 2_147_483_647)) {
    throw invalidOption('shutdownTimeoutMs', shutdownTimeoutMs, 'a number of ms > 0 and at most 2147483647');
  }
  running = true;
  try {
    return await start(options);
  } catch (err) {
    running = false;
    throw err;
  }
}

let running = false;

async function start(options: LifelineOptions): Promise<Lifeline> {
  const health = options.health ?? processHealth;
  const { captureStacks, maxSpans, redact, ...verdicts } = options.diagnostics ?? {};
  const inFlight = new InFlightSpanProcessor({
    ...(captureStacks === undefined ? {} : { captureStacks }),
    ...(maxSpans === undefined ? {} : { maxSpans }),
    ...(redact === undefined ? {} : { redact }),
  });
  const diagnostics = new Diagnostics({ ...verdicts, inFlight, ...(options.logger === undefined ? {} : { logger: options.logger }) });
  const spanProcessors: SpanProcessor[] = [
    inFlight, // first: it redacts secrets before any exporter sees a span
    new DeadlineSpanProcessor(),
    ...(options.spanProcessors ?? (options.traceExporter ? [options.traceExporter] : traceExportersFromEnv()).map((exporter) => batchProcessorFromEnv(exporter))),
  ];
  let probePort: number | undefined;
  const { dispatcher: _given, ...deadlinePolicy } = options.deadlines === false ? {} : (options.deadlines ?? {});
  // NodeSDK's shutdown leaves instrumentations enabled: lifeline disables its own, as it uninstalls the dispatcher.
  const grpcDeadlines =
    options.deadlines === false ? undefined : new GrpcDeadlineInstrumentation({ ...deadlinePolicy, ...(options.propagation?.maxInboundMs === undefined ? {} : { maxInboundMs: options.propagation.maxInboundMs }) });
  const config: Partial<NodeSDKConfiguration> = {
    spanProcessors,
    textMapPropagator: new CompositePropagator({
      propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator(), new DeadlinePropagator(options.propagation)],
    }),
    instrumentations: [
      // Before OpenTelemetry's grpc instrumentation, so deadlines reach handlers it wraps.
      ...(grpcDeadlines === undefined ? [] : [grpcDeadlines]),
      new GrpcInstrumentation(),
      new UndiciInstrumentation(options.undici),
      new HttpInstrumentation({
        ...options.http,
        requestHook: (span, request) => {
          // A policy rule gave this node:http call its deadline after its span started.
          const deadline = request instanceof http.ClientRequest ? policyDeadlineOf(request) : undefined;
          if (deadline !== undefined) recordDeadline(span, deadline, true);
          options.http?.requestHook?.(span, request);
        },
        ignoreIncomingRequestHook: (req) => (probePort !== undefined && req.socket.localPort === probePort) || (options.http?.ignoreIncomingRequestHook?.(req) ?? false),
      }),
      new PinoInstrumentation(), // trace_id / span_id on every pino line written inside a span
      ...(options.instrumentations ?? []),
    ],
    // Logs and metrics stay off unless their exporters are asked for: lifeline is about traces.
    ...(process.env.OTEL_LOGS_EXPORTER === undefined ? { logRecordProcessors: [] } : {}),
    ...(process.env.OTEL_METRICS_EXPORTER === undefined ? { metricReaders: [] } : {}),
    ...(options.serviceName === undefined ? {} : { serviceName: options.serviceName }),
  };
  const sdk = new NodeSDK(config);
  sdk.start();
  let dispatcher: InstalledDeadlineDispatcher | undefined;
  let httpDeadlines: InstalledHttpDeadlines | undefined;
  let probe: ProbeServer | undefined;
  try {
    if (options.deadlines !== false) {
      dispatcher = installDeadlineDispatcher(options.deadlines);
      httpDeadlines = installHttpDeadlines(deadlinePolicy);
    }
    probe = options.probe === false ? undefined : await startProbeServer({ ...options.probe, ...(options.logger ? { logger: options.logger } : {}), health });
    probePort = probe?.port;
    health.useDiagnostics(diagnostics);
  } catch (err) {
    dispatcher?.uninstall();
    httpDeadlines?.uninstall();
    grpcDeadlines?.disable();
    await sdk.shutdown();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  const lifeline: Lifeline = {
    health,
    probe,
    forceFlush: async () => {
      // NodeSDK keeps its tracer provider private; the global proxy hands out the one it registered.
      const provider = trace.getTracerProvider() as { getDelegate?: () => { forceFlush?: () => Promise<void> } };
      await provider.getDelegate?.().forceFlush?.();
    },
    shutdown: () =>
      (stopping ??= (async () => {
        process.off('SIGTERM', onSigterm);
        // Spans first, probes last: liveness keeps answering 200 until the very end. Whatever
        // the exporter does, everything else is still released.
        try {
          await sdk.shutdown();
        } finally {
          dispatcher?.uninstall();
          httpDeadlines?.uninstall();
          grpcDeadlines?.disable();
          await probe?.close().catch(() => undefined);
          health.close();
          // The process-wide catalog is closed for good: only a start with a catalog of its own may follow.
          running = options.health === undefined;
        }
      })()),
  };
  const timeoutMs = options.shutdownTimeoutMs ?? 5_000;
  function onSigterm(): void {
    health.drain();
    // Whether the app will handle shutdown itself is known only now: it may register later than us.
    const appHandles = process.listenerCount('SIGTERM') > 1;
    const work = appHandles ? lifeline.forceFlush() : lifeline.forceFlush().then(() => lifeline.shutdown());
    void withinBudget(work, timeoutMs).then(() => {
      if (appHandles) return;
      process.off('SIGTERM', onSigterm);
      process.kill(process.pid, 'SIGTERM'); // no handler left: the default action ends the process
    });
  }
  if (options.handleSigterm ?? true) process.on('SIGTERM', onSigterm);
  return lifeline;
}

/** Waits for `work`, but never longer than `ms`; failures are swallowed (shutdown must go on). */
function withinBudget(work: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    work.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      () => {
        clearTimeout(timer);
        resolve();
      },
    );
  });
}
