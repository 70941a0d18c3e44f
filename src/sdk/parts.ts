// The shapes of lifeline's SDK parts: what a caller passes and gets back. The assembly is in lifeline-parts.ts.
import type { TextMapPropagator } from '@opentelemetry/api';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import type { HttpInstrumentationConfig } from '@opentelemetry/instrumentation-http';
import type { IdGenerator, SpanProcessor } from '@opentelemetry/sdk-trace';
import type {
  DeadlineDispatcherOptions,
  DiagnosticsOptions,
  HealthCatalog,
  HealthMetricsOptions,
  InboundDeadlineOptions,
  InFlightSpanProcessorOptions,
  Logger,
  ProbeServer,
  ProbeServerOptions,
  WatchdogOptions,
} from '../index.js';

/** What lifeline adds to an OpenTelemetry SDK, whoever creates the SDK. */
export interface LifelinePartsOptions {
  /**
   * The catalog to serve; default the process-wide `health`. From `start()` on, its verdicts are
   * explained by the diagnostics made from {@link LifelinePartsOptions.diagnostics} (they read the
   * spans in flight), in place of those it was built with.
   */
  health?: HealthCatalog;
  /**
   * Probe server options, or `false` for no probe server. When the port is taken by this service
   * instance's own lifeline — the process that started this one (a `node:cluster` primary, a
   * parent that forked it), proven by a key inherited through the environment, never by what the
   * port answers — this process runs without a probe server and reports its liveness there: the
   * holder's `/live` fails while this process is unhealthy or its event loop stops. When anything
   * else holds it, `whenPortBusy: 'warn'` logs one line naming the holder and runs without a probe
   * server (register mode does this when no port was chosen: npm, test runners and their workers
   * all start under one `NODE_OPTIONS`); the default `'fail'` rejects, as a deployment that chose a
   * port must get it.
   */
  probe?: false | (Omit<ProbeServerOptions, 'health'> & { whenPortBusy?: 'fail' | 'warn' });
  /** Where lifeline logs; default lifeline's pino logger. */
  logger?: Logger;
  /**
   * Deadline policy of every outgoing call — Node's `fetch` and undici (the global dispatcher),
   * node:http/https (axios, got, …) and gRPC — or `false` to bound none of them. `headersTimeoutMs`
   * defaults to 60 000 here (0 turns it off).
   */
  deadlines?: false | DeadlineDispatcherOptions;
  /** Options of the inbound/outbound deadline header. */
  propagation?: InboundDeadlineOptions;
  /** How unhealthy verdicts explain themselves: in-flight tracking, stacks, rate limit, caps, redaction. */
  diagnostics?: Omit<DiagnosticsOptions, 'inFlight' | 'tracerProvider' | 'logger'> & InFlightSpanProcessorOptions;
  /**
   * On SIGTERM (and SIGINT): readiness fails at once, liveness stays up, what is in flight is
   * exported and spans are flushed; then, if the app has no handler of its own for the signal,
   * lifeline drains the app's servers, shuts down and lets the signal end the process (a second
   * signal ends it at once). `false` leaves both signals alone. Default true.
   */
  handleSigterm?: boolean;
  /**
   * Answers gRPC's health protocol (`grpc.health.v1.Health`) from the catalog on every grpc-js
   * server the app binds, for Kubernetes' native gRPC probes (see `addGrpcHealthService`); a
   * server where the app adds a health service of its own keeps the app's. Default true.
   */
  grpcHealth?: boolean;
  /**
   * On an uncaught exception, or an unhandled rejection, that would end the process (the app has no
   * `uncaughtException` handler of its own): the error is printed as Node prints it, a span names
   * it, what was in flight is exported and flushed (within `shutdownTimeoutMs`), then the process
   * exits with code 1, as it would have. `false` leaves it to Node. Never with
   * `--abort-on-uncaught-exception` (its core dump is worth more). Default true.
   */
  handleUncaught?: boolean;
  /** The most a flush or shutdown at the process's end (a signal, a crash) may take before it exits anyway. Default 5 000 ms. */
  shutdownTimeoutMs?: number;
  /**
   * Health as OpenTelemetry metrics: per-component status, tick lag and verdicts, components by
   * state, event-loop delay (`installHealthMetrics`), and deadline-exceeded and deadline-missing
   * counts (`DeadlineMetricsSpanProcessor`, among `spanProcessors`), through the global meter
   * provider. Default: on when `OTEL_METRICS_EXPORTER` names an exporter (not `none`).
   */
  metrics?: boolean | HealthMetricsOptions;
  /**
   * The event-loop watchdog thread ({@link otel-lifeline#startWatchdog}), or `false` for none. Default on, with
   * `thresholdMs` the catalog's interval, at most 5 000 ms; its spans use the `OTEL_*` exporters,
   * and the diagnostics' redaction.
   */
  watchdog?: false | WatchdogOptions;
}

/** A started lifeline: the catalog, its probe server, and the SDK's flush and shutdown. */
export interface Lifeline {
  /** The catalog it serves and explains: the `health` option, else the process-wide `health`. `shutdown` closes it. */
  readonly health: HealthCatalog;
  /** The probe server, or `undefined` when started with `probe: false`. */
  readonly probe: ProbeServer | undefined;
  /** Exports every ended span now (through the global tracer provider). */
  forceFlush(): Promise<void>;
  /**
   * Closes the probe server and the catalog, restores the global dispatcher and node:http; with
   * `startLifeline`, first flushes and stops the SDK it started. Idempotent.
   */
  shutdown(): Promise<void>;
}

/**
 * lifeline's parts for an OpenTelemetry SDK you create yourself (a `NodeSDK` with
 * `getNodeAutoInstrumentations()`, say). Creating them changes nothing global; `start()` does,
 * once your SDK has started.
 *
 * @example
 * ```ts
 * import { NodeSDK } from '@opentelemetry/sdk-node';
 * import { BatchSpanProcessor } from '@opentelemetry/sdk-trace';
 * import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
 * import { getNodeAutoInstrumentations } from '@opentelemetry/auto-instrumentations-node';
 * import { lifelineParts } from 'otel-lifeline/sdk';
 *
 * const lifeline = lifelineParts({ probe: { port: 5555 } });
 * const sdk = new NodeSDK({
 *   spanProcessors: [...lifeline.spanProcessors, new BatchSpanProcessor({ exporter: new OTLPTraceExporter() })],
 *   textMapPropagator: lifeline.propagator,
 *   idGenerator: lifeline.idGenerator,
 *   instrumentations: [
 *     ...lifeline.instrumentations,
 *     getNodeAutoInstrumentations({ '@opentelemetry/instrumentation-http': lifeline.httpConfig() }),
 *   ],
 * });
 * sdk.start();
 * await lifeline.start(); // deadlines on every client, probe server, verdict diagnostics
 * ```
 */
export interface LifelineParts {
  /**
   * Add these to your SDK's `spanProcessors`, before or after your own: they come composed, in the
   * order that is correct among themselves (in-flight tracking, deadline attributes, redaction of
   * every span before any exporter sees it, and deadline metrics when metrics are on).
   */
  readonly spanProcessors: readonly SpanProcessor[];
  /** W3C trace context and baggage, plus the deadline header: your SDK's `textMapPropagator`. */
  readonly propagator: TextMapPropagator;
  /**
   * Your SDK's `idGenerator` (random IDs, as the SDK's own): with it, the snapshot of a stuck tick
   * is the root of that tick's own trace in Jaeger; without it, a trace of its own linked to the verdict.
   */
  readonly idGenerator: IdGenerator;
  /** Deadlines for gRPC: put these before OpenTelemetry's grpc instrumentation. */
  readonly instrumentations: readonly Instrumentation[];
  /** `config` plus lifeline's hooks, for your http instrumentation: probe requests untraced, policy deadlines recorded on client spans. */
  httpConfig(config?: HttpInstrumentationConfig): HttpInstrumentationConfig;
  /** Bounds every outgoing call, starts the probe server and the verdict diagnostics. Call it after your SDK has started, once. */
  start(): Promise<Lifeline>;
}
