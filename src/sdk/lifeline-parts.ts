import { trace } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import { RandomIdGenerator } from '@opentelemetry/sdk-trace';
import { createRequire } from 'node:module';
import { DEFAULT_HEADERS_TIMEOUT_MS, exporterAskedFor, unsupportedNode } from '../config/index.js';
import { MAX_TIMER_MS, numberOption } from '../errors/index.js';
import { installRouteNames, policyDeadlineOf } from '../http/index.js';
import { trackHttpServers, watchEnding } from '../shutdown/index.js';
import { DeadlinePolicy } from '../policy/index.js';
import { installDriverDeadlines } from '../drivers/index.js';
import { installHttp2Deadlines } from '../http2/index.js';
import type { Installed } from '../install/index.js';
import { installDispatcherDeadlines, type InstalledDispatcherDeadlines } from '../undici/index.js';
import { SELF_COMPONENT, useDiagnostics } from '../health/index.js';
import type { MemberReporter } from '../probe/index.js';
import { installInboundTrust } from '../inbound/index.js';
import { SnapshotIdGenerator } from '../diagnostics/index.js';
import { RedactionSpanProcessor } from '../redaction/index.js';
import { startWatchdog, type Watchdog } from '../watchdog/index.js';
import { defaultLogger, loggerOrDefault, logSwallowed } from '../log/index.js';
import { recordDeadline } from '../deadline-spans/index.js';
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
  type DiagnosticSnapshot,
  type InstalledDeadlineDispatcher,
  type ProbeServer,
} from '../index.js';
import { GrpcDeadlineInstrumentation, GrpcHealthInstrumentation } from '../grpc/instrumentations.js';
import { syncBuiltinViews } from './builtin-views.js';
import type { Lifeline, LifelineParts, LifelinePartsOptions } from './parts.js';
import { leaveInstance, probeServer, type ProbeOptions } from './probe-or-member.js';

// Required, not imported: see the probe server (an ES import of node:http sets a global).
const http = createRequire(import.meta.url)('node:http') as typeof import('node:http');

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
        thresholdMs: Math.min(interval, 5_000), // an interval is never below the least threshold (src/settings)
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
      /**
       * Releases what this start installed, one list for a failed start and for shutdown: probes
       * last, so liveness answers until the end; the catalog (at shutdown only) before the
       * diagnostics it was given. A probe server or watchdog that fails to close is logged and the
       * rest still released; the uninstalls before them do not throw.
       */
      const release = async (closeCatalog: boolean): Promise<void> => {
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
        await member?.close();
        await probe?.close().catch((err: unknown) => {
          logSwallowed(options.logger ?? defaultLogger(), 'closing the probe server', err);
        });
        leaveInstance(probe);
        await watchdog?.close().catch((err: unknown) => {
          logSwallowed(options.logger ?? defaultLogger(), 'stopping the watchdog', err);
        });
        if (closeCatalog) health.close();
        // Given to the catalog as an object, so the catalog leaves closing it to its maker.
        diagnostics.close();
      };
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
        // Last, when nothing can throw: a failed start closes these diagnostics, and the catalog
        // must not keep closed ones.
        useDiagnostics(health, diagnostics);
      } catch (err) {
        await release(false);
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
              await release(true);
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
