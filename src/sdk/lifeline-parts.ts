import { trace, type TextMapPropagator } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import type { HttpInstrumentationConfig } from '@opentelemetry/instrumentation-http';
import { RandomIdGenerator, type IdGenerator, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { DEFAULT_HEADERS_TIMEOUT_MS, exporterAskedFor, unsupportedNode } from '../config/index.js';
import { MAX_TIMER_MS, numberOption, oneOf } from '../errors/index.js';
import { installRouteNames, policyDeadlineOf, trackHttpServers } from '../http/index.js';
import { DeadlinePolicy } from '../policy/index.js';
import { installDriverDeadlines } from '../drivers/index.js';
import { installHttp2Deadlines } from '../http2/index.js';
import type { Installed } from '../install/index.js';
import { installDispatcherDeadlines, type InstalledDispatcherDeadlines } from '../undici/index.js';
import { SELF_COMPONENT, useDiagnostics } from '../health/index.js';
import { whenFirstResolved } from '../hooks/index.js';
import {
  findPortHolder,
  INSTANCE_ENV,
  instanceHolder,
  instanceValue,
  joinHolder,
  newInstanceKey,
  type MemberReporter,
} from '../probe/index.js';
import { installInboundTrust } from '../inbound/index.js';
import { SnapshotIdGenerator } from '../diagnostics/index.js';
import { RedactionSpanProcessor } from '../redaction/index.js';
import { startWatchdog, type Watchdog, type WatchdogOptions } from '../watchdog/index.js';
import { defaultLogger, loggerOrDefault, logSwallowed } from '../log/index.js';
import { recordDeadline } from '../processors/index.js';
import { DeadlineMetricsSpanProcessor, installHealthMetrics, installStuckMetrics, type HealthMetricsOptions } from '../metrics/index.js';
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
  type InboundDeadlineOptions,
  type DiagnosticSnapshot,
  type DiagnosticsOptions,
  type Health,
  type InFlightSpanProcessorOptions,
  type InstalledDeadlineDispatcher,
  type Logger,
  type ProbeServer,
  type ProbeServerOptions,
} from '../index.js';
import { GrpcDeadlineInstrumentation } from './grpc-deadline-instrumentation.js';
import { GrpcHealthInstrumentation } from './grpc-health-instrumentation.js';
import { watchEnding } from './process-ending.js';

// Required, not imported: see the probe server (an ES import of node:http sets a global).
const http = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/** What lifeline adds to an OpenTelemetry SDK, whoever creates the SDK. */
export interface LifelinePartsOptions {
  /** The catalog to serve; default the process-wide `health`. */
  health?: Health;
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
  readonly health: Health;
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
  /** Add these to your SDK's `spanProcessors`, in any place: in-flight tracking, deadline attributes, and redaction of every span before any exporter sees it. */
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

/** What {@link startLifeline} gets beside the parts. */
export interface AssembledParts extends LifelineParts {
  /** Stops what the parts started early (the watchdog thread) when `start` is never called. */
  discard(): Promise<void>;
}

/**
 * Builds the parts; `stopSdk` is how {@link startLifeline} makes shutdown stop the SDK it owns.
 * `early` starts the watchdog thread now: it boots on another core while the SDK and the
 * instrumentations load, instead of after them, on the path to the app's first answer.
 */
export function assembleParts(
  options: LifelinePartsOptions,
  stopSdk?: () => Promise<void>,
  early = false,
  flushAtExit: (flush: () => Promise<void>) => Promise<void> = (flush) => flush(),
): AssembledParts {
  const unsupported = unsupportedNode();
  if (unsupported !== undefined) throw new LifelineError('ERR_UNSUPPORTED_NODE', unsupported);
  const { shutdownTimeoutMs } = options;
  if (shutdownTimeoutMs !== undefined)
    numberOption('shutdownTimeoutMs', shutdownTimeoutMs, { min: 0, above: true, max: MAX_TIMER_MS, unit: 'ms' });
  const health = options.health ?? processHealth;
  // Read now: the process-wide catalog reads LIFELINE_HEALTH_INTERVAL_MS when first asked, and a bad value must fail here.
  const interval = health.interval;
  const { captureStacks, maxSpans, maxStackBytes, redact, ...verdicts } = options.diagnostics ?? {};
  const inFlight = new InFlightSpanProcessor({
    ...(captureStacks === undefined ? {} : { captureStacks }),
    ...(maxSpans === undefined ? {} : { maxSpans }),
    ...(maxStackBytes === undefined ? {} : { maxStackBytes }),
    ...(redact === undefined ? {} : { redact }),
  });
  const ids = new SnapshotIdGenerator(new RandomIdGenerator());
  const diagnostics = new Diagnostics({ ...verdicts, inFlight, ids, ...(options.logger === undefined ? {} : { logger: options.logger }) });
  // A call nothing else bounds still gets its response head within a minute (0 turns it off).
  const deadlines = options.deadlines === false ? false : { headersTimeoutMs: DEFAULT_HEADERS_TIMEOUT_MS, ...options.deadlines };
  const { dispatcher: _given, ...deadlinePolicy } = deadlines === false ? {} : deadlines;
  new DeadlinePolicy(deadlinePolicy); // a bad policy throws here, not when the instrumentations are made
  // Made when first asked for, beside the SDK's other instrumentations: an instrumentation made
  // early installs OpenTelemetry's require hook, and core modules required between then and the
  // making of the others (http, say) would be passed over for good.
  let grpcDeadlines: GrpcDeadlineInstrumentation | undefined;
  let grpcHealth: GrpcHealthInstrumentation | undefined;
  const instrumentations = (): Instrumentation[] => {
    if (deadlines !== false) grpcDeadlines ??= new GrpcDeadlineInstrumentation({ ...deadlinePolicy, ...options.propagation });
    if (options.grpcHealth !== false) grpcHealth ??= new GrpcHealthInstrumentation({ health });
    return [grpcDeadlines, grpcHealth].filter((instrumentation) => instrumentation !== undefined);
  };
  let probePort: number | undefined;
  let started = false;
  const metricsOptions = metricsFrom(options.metrics);

  const makeWatchdog = (): Watchdog | undefined => {
    if (options.watchdog === false) return undefined;
    const redact = options.diagnostics?.redact;
    try {
      const onBlock = options.watchdog?.onBlock;
      return startWatchdog({
        thresholdMs: Math.min(interval, 5_000),
        ...(redact === undefined ? {} : { redact }),
        ...(options.logger === undefined ? {} : { logger: options.logger }),
        ...options.watchdog,
        ...(options.probe === false ? {} : { prepareProbes: true }),
        onBlock: (block) => {
          try {
            // Past the catalog's own limit its healthcheck failed, and no round could record that verdict.
            if (block.blockedMs >= health.stallAfterMs) diagnostics.onEventLoopBlock(block, () => withSelfCheckFailed(health.diagnose()));
          } finally {
            onBlock?.(block);
          }
        },
      });
    } catch (err) {
      if ((err as LifelineError).code !== 'ERR_WATCHDOG_UNAVAILABLE') throw err;
      (options.logger ?? defaultLogger()).warn(
        { err: (err as Error).message },
        'lifeline: no watchdog thread; probes are served on the main thread',
      );
      return undefined;
    }
  };
  const spanProcessors = [
    inFlight,
    new DeadlineSpanProcessor(),
    new RedactionSpanProcessor(redact),
    ...(metricsOptions === undefined
      ? []
      : [new DeadlineMetricsSpanProcessor({ ...(metricsOptions.meterProvider ? { meterProvider: metricsOptions.meterProvider } : {}) })]),
  ];
  const propagator = new CompositePropagator({
    propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator(), new DeadlinePropagator(options.propagation)],
  });
  // Last: every option is valid by now, so nothing can throw and leave the thread running.
  let earlyWatchdog = early ? makeWatchdog() : undefined;

  return {
    spanProcessors,
    idGenerator: ids,
    propagator,
    get instrumentations() {
      return instrumentations();
    },
    httpConfig: (config = {}) => ({
      ...config,
      requestHook: (span, request) => {
        if (request instanceof http.ClientRequest) {
          // A policy rule gave this node:http call its deadline after its span started.
          const deadline = policyDeadlineOf(request);
          if (deadline !== undefined) recordDeadline(span, deadline, true);
        } else inFlight.attachRequest(span, request); // names its handler, should it get stuck
        config.requestHook?.(span, request);
      },
      ignoreIncomingRequestHook: (req) =>
        (probePort !== undefined && req.socket.localPort === probePort) || (config.ignoreIncomingRequestHook?.(req) ?? false),
    }),
    discard: async () => {
      const thread = earlyWatchdog;
      earlyWatchdog = undefined;
      await thread?.close();
    },
    start: async () => {
      if (started) throw new LifelineError('ERR_ALREADY_STARTED', 'these lifeline parts are already started');
      // Two lifelines would fight over the global dispatcher, node:http and SIGTERM.
      if (running)
        throw new LifelineError(
          'ERR_ALREADY_STARTED',
          'lifeline is already started in this process (once shut down, it can start again only with a catalog of its own)',
        );
      started = true;
      running = true;
      let dispatcher: InstalledDeadlineDispatcher | undefined;
      let httpDeadlines: Installed | undefined;
      let driverDeadlines: Installed | undefined;
      let http2Deadlines: Installed | undefined;
      let ownDispatchers: InstalledDispatcherDeadlines | undefined;
      let probe: ProbeServer | undefined;
      let member: MemberReporter | undefined;
      let watchdog: Watchdog | undefined;
      let healthMetrics: Installed | undefined;
      let stuckMetrics: { uninstall(): void } | undefined;
      const builtinViews = syncBuiltinViews();
      // Whose inbound deadlines are obeyed is judged by the caller's address, recorded per request.
      const inboundTrust = installInboundTrust();
      const servers = trackHttpServers();
      // Server spans named by the framework's route, with or without OpenTelemetry's instrumentation for it.
      const routeNames = installRouteNames();
      try {
        if (deadlines !== false) {
          dispatcher = installDeadlineDispatcher(deadlines);
          // The app's own Pools, Clients and Agents (of any undici copy); the global one is bounded once, by `dispatcher`.
          ownDispatchers = installDispatcherDeadlines(deadlinePolicy);
          httpDeadlines = installHttpDeadlines(deadlinePolicy);
          http2Deadlines = installHttp2Deadlines(deadlinePolicy);
          driverDeadlines = installDriverDeadlines(deadlinePolicy);
        }
        watchdog = early ? earlyWatchdog : makeWatchdog();
        earlyWatchdog = undefined;
        // With a watchdog the probes are served from its thread: they answer while this loop is blocked.
        const guard = watchdog;
        const serve =
          guard === undefined
            ? (rest: ProbeOptions) => startProbeServer({ ...rest, ...(options.logger ? { logger: options.logger } : {}), health })
            : ({ logger: _logger, ...rest }: ProbeOptions) => guard.serveProbes(health, rest); // its log lines come back through the watchdog's logger
        ({ probe, member } = options.probe === false ? {} : await probeServer(options.probe ?? {}, serve, health, options.logger));
        probePort = probe?.port;
        useDiagnostics(health, diagnostics);
        // Stuck work is exported with no verdict needed: a service that registered nothing has none.
        diagnostics.watchStuck(interval);
        // After the SDK started: the meter is taken from the global provider it registered.
        if (metricsOptions !== undefined) {
          healthMetrics = installHealthMetrics(health, metricsOptions);
          stuckMetrics = installStuckMetrics(
            diagnostics,
            metricsOptions.meterProvider ? { meterProvider: metricsOptions.meterProvider } : {},
          );
        }
      } catch (err) {
        healthMetrics?.uninstall();
        stuckMetrics?.uninstall();
        await member?.close();
        await probe?.close();
        leaveInstance(probe);
        await watchdog?.close();
        diagnostics.close();
        servers.uninstall();
        routeNames.uninstall();
        inboundTrust.uninstall();
        builtinViews.stop();
        dispatcher?.uninstall();
        httpDeadlines?.uninstall();
        driverDeadlines?.uninstall();
        http2Deadlines?.uninstall();
        ownDispatchers?.uninstall();
        grpcDeadlines?.disable();
        grpcHealth?.disable();
        running = false;
        throw err;
      }
      let stopping: Promise<void> | undefined;
      const lifeline: Lifeline = {
        health,
        probe,
        forceFlush,
        shutdown: () =>
          (stopping ??= (async () => {
            ending.stop();
            process.off('beforeExit', onBeforeExit);
            // Spans first, probes last: liveness keeps answering 200 until the very end. Whatever
            // the exporter does, everything else is still released.
            try {
              await stopSdk?.();
            } finally {
              healthMetrics?.uninstall();
              stuckMetrics?.uninstall();
              servers.uninstall();
              routeNames.uninstall();
              inboundTrust.uninstall();
              builtinViews.stop();
              dispatcher?.uninstall();
              httpDeadlines?.uninstall();
              driverDeadlines?.uninstall();
              http2Deadlines?.uninstall();
              ownDispatchers?.uninstall();
              // NodeSDK's shutdown leaves instrumentations enabled: lifeline disables its own.
              grpcDeadlines?.disable();
              grpcHealth?.disable();
              // Shutdown goes on whatever one part says; what failed is said.
              await member?.close();
              await probe?.close().catch((err: unknown) => {
                logSwallowed(options.logger ?? defaultLogger(), 'closing the probe server', err);
              });
              leaveInstance(probe);
              await watchdog?.close().catch((err: unknown) => {
                logSwallowed(options.logger ?? defaultLogger(), 'stopping the watchdog', err);
              });
              health.close();
              // Given to the catalog as an object, so the catalog leaves closing it to its maker.
              diagnostics.close();
              // The process-wide catalog is closed for good: only a start with a catalog of its own may follow.
              running = options.health === undefined;
            }
          })()),
      };
      const logger = loggerOrDefault(options.logger); // pino loads only if something is said
      const ending = watchEnding({
        health,
        diagnostics,
        logger,
        timeoutMs: options.shutdownTimeoutMs ?? 5_000,
        signals: options.handleSigterm ?? true,
        crashes: options.handleUncaught ?? true,
        publish: () => watchdog?.publish(),
        appServers: () =>
          servers.servers().filter((server) => {
            const address = server.address();
            return !(typeof address === 'object' && address !== null && address.port === probe?.port);
          }),
        drain: (appServers, deadlineMs) => servers.drain(appServers, deadlineMs),
        forceFlush,
        shutdown: () => lifeline.shutdown(),
      });
      // A process that ends by itself (a batch job, a test file) would drop the spans still batched:
      // flush once when the event loop runs dry; the flush's own work ends, and the process with it
      // (with startLifeline's exporters, within a budget: no collector must not delay the exit).
      function onBeforeExit(): void {
        void flushAtExit(() => lifeline.forceFlush()).catch(() => undefined);
      }
      process.once('beforeExit', onBeforeExit);
      return lifeline;
    },
  };
}

/**
 * lifeline's parts for your own OpenTelemetry SDK: see {@link LifelineParts}. Throws a
 * `LifelineError` on an invalid option.
 */
export function lifelineParts(options: LifelinePartsOptions = {}): LifelineParts {
  return assembleParts(options);
}

let running = false;

/**
 * Exports every ended span now, through the tracer provider the SDK registered globally: the way
 * an app with a SIGTERM handler of its own flushes before it exits, in register mode too (where it
 * holds no lifeline object).
 *
 * @example
 * ```ts
 * import { forceFlush } from 'otel-lifeline/sdk';
 *
 * process.on('SIGTERM', () => {
 *   server.close(async () => {
 *     await forceFlush(); // the spans of the last requests, before the process ends
 *     process.exit(0);
 *   });
 * });
 * ```
 */
export function forceFlush(): Promise<void> {
  // One after another: a batch processor's flush does not wait for an export another flush started,
  // so a second flush (the app's, while lifeline's SIGTERM flush runs) would return before it ended.
  const run = flushing.then(async () => {
    // NodeSDK keeps its tracer provider private; the global proxy hands out the one it registered.
    const provider = trace.getTracerProvider() as { getDelegate?: () => { forceFlush?: () => Promise<void> } };
    await provider.getDelegate?.().forceFlush?.();
  });
  flushing = run.catch(() => undefined);
  return run;
}

let flushing: Promise<void> = Promise.resolve();

/**
 * An ES module that imported `node:http` before the SDK started (the SDK's own dependencies do)
 * fixed the module's named exports then; an app importing `{ request }` later would get that
 * unpatched view. Requiring the module lets OpenTelemetry's require hook patch it now, and
 * `syncBuiltinESMExports` brings every ES module view of it up to date. `node:https` (with TLS,
 * ~3.5 MB and some ms to load) the same, but only once the app resolves it: an ES module's import of
 * one of Node's modules never goes through `require`, where the hook would see it.
 * (`process.getBuiltinModule('https')` passes no hook: a process that gets https only that way
 * gets it unpatched, unless something else loaded it first.)
 */
function syncBuiltinViews(): { stop(): void } {
  const require = createRequire(import.meta.url);
  require('http');
  syncBuiltinESMExports();
  const stop = whenFirstResolved(['https'], () => {
    require('https');
    syncBuiltinESMExports();
  });
  return { stop };
}

type ProbeOptions = Omit<ProbeServerOptions, 'health'>;

/**
 * The probe server, or, when the port is taken by this service instance's own (the process that
 * started this one, proven by the key this one inherited), a reporter that keeps the holder's
 * `/live` honest about this process. Any other holder fails start-up (`whenPortBusy: 'fail'`) or
 * is warned of, naming it: never deferred to on the word of what it answers.
 */
async function probeServer(
  options: NonNullable<Exclude<LifelinePartsOptions['probe'], false>>,
  serve: (options: ProbeOptions) => Promise<ProbeServer>,
  health: Health,
  logger: Logger | undefined,
): Promise<{ probe?: ProbeServer; member?: MemberReporter }> {
  const { whenPortBusy = 'fail', ...rest } = options;
  oneOf('probe.whenPortBusy', whenPortBusy, ['fail', 'warn'] as const);
  const key = newInstanceKey();
  try {
    const probe = await serve({ ...rest, instanceKey: key });
    // Processes started from now on (cluster workers, forked helpers) inherit it, and nothing else has it.
    process.env[INSTANCE_ENV] = instanceValue(process.pid, probe.port, key);
    return { probe };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    const port = rest.port ?? 5555;
    const log = logger ?? defaultLogger();
    const member = await joinHolder({
      port,
      host: rest.host ?? '127.0.0.1',
      live: () => health.status('live'),
      staleAfterMs: health.stallAfterMs,
      everyMs: Math.max(100, health.interval / 2),
      logger: log,
      // Part of the service (a cluster worker, a forked helper: it has a channel to its parent)
      // answers for the pod's liveness; a script or tool the service runs does not.
      report: process.channel !== undefined,
    });
    if (member !== undefined) {
      log.info(
        { port, holder: member.holderPid },
        member.reporting
          ? 'lifeline: the probe server of this service instance (the process that started this one) answers the probes on this port; this process reports its liveness there'
          : 'lifeline: the probe server of this service instance (the process that started this one) answers the probes on this port; this process, which it ran without a channel to it, does not answer for the pod',
      );
      return { member };
    }
    const { description: holder } = findPortHolder(port);
    if (whenPortBusy === 'fail') throw Object.assign(err as Error, { holder });
    log.warn(
      { port, holder },
      `lifeline: the probe port is held by ${holder}, not by this service instance; running without a probe server`,
    );
    return {};
  }
}

/** Processes started after this process's probe server closed must not report to it. */
function leaveInstance(probe: ProbeServer | undefined): void {
  if (probe !== undefined && instanceHolder()?.pid === process.pid) Reflect.deleteProperty(process.env, INSTANCE_ENV);
}

/** A snapshot naming the catalog's own `healthcheck` too: what the probes said during a block. */
function withSelfCheckFailed(snapshot: DiagnosticSnapshot): DiagnosticSnapshot {
  return { ...snapshot, unhealthy: [...new Set([...snapshot.unhealthy, SELF_COMPONENT])].sort() };
}

/** Whether a lifeline is started in this process. */
export function lifelineRunning(): boolean {
  return running;
}

/** The health metrics' options, or `undefined` for none (by default none unless `OTEL_METRICS_EXPORTER` names an exporter). */
function metricsFrom(option: LifelinePartsOptions['metrics']): HealthMetricsOptions | undefined {
  if (option === false) return undefined;
  // As the SDK is handed it: an unknown exporter name is dropped (and warned of), `none` if nothing is left.
  if (option === undefined) return exporterAskedFor('OTEL_METRICS_EXPORTER') ? {} : undefined;
  return option === true ? {} : option;
}
