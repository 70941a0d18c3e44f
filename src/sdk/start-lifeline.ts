import type { Instrumentation } from '@opentelemetry/instrumentation';
import type { HttpInstrumentationConfig } from '@opentelemetry/instrumentation-http';
import type { UndiciInstrumentationConfig } from '@opentelemetry/instrumentation-undici';
import type { NodeSDKConfiguration } from '@opentelemetry/sdk-node';
import type { Sampler, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import { apiCopyFrom, exporterAskedFor, warnEnvCorrections, withCorrectedEnv } from '../config/index.js';
import { LifelineError } from '../index.js';
import { loggerOrDefault } from '../log/index.js';
import { autoInstrumentations } from './auto-instrumentations.js';
import type { DeferredInstrumentations } from './deferred-instrumentations.js';
import { startTracingSdk } from './tracing-sdk.js';
import { installEsmHook, instrumentedModules } from './esm-hook.js';
import {
  batchProcessorFromEnv,
  batchTuningFromEnv,
  ExportWarningExporter,
  flushAtExit,
  otlpDestination,
  RetryingExporter,
  traceExportersFromEnv,
  type RetryOptions,
} from '../export/index.js';
import { EvidenceSampler, EvidenceSpanProcessor, samplerFromEnv, type EvidenceSpanProcessorOptions } from '../sampling/index.js';
import { assembleParts, lifelineRunning } from './lifeline-parts.js';
import type { Lifeline, LifelineParts, LifelinePartsOptions } from './parts.js';

/** Options of {@link startLifeline}. */
export interface LifelineOptions extends LifelinePartsOptions {
  /** `service.name`; default from `OTEL_SERVICE_NAME`. */
  serviceName?: string;
  /** Where spans go, batched; default the exporters `OTEL_TRACES_EXPORTER` names (OTLP). */
  traceExporter?: SpanExporter;
  /**
   * How much the exporter keeps for a retry while the collector is unreachable (`maxSpans`, default
   * 2,048; `maxBytes`, default 16 MiB, estimated); past either the oldest spans are dropped and
   * counted on the `lifeline.export.dropped` counter.
   */
  exportBuffer?: Pick<RetryOptions, 'maxSpans' | 'maxBytes'>;
  /**
   * Span processors to use instead of the batched `traceExporter`; lifeline's own run first. With
   * `evidence` on they are wrapped in an `EvidenceSpanProcessor`: a span of a trace kept as
   * evidence reaches their `onEnd` as a copy flagged sampled, not as the SDK's span object.
   */
  spanProcessors?: SpanProcessor[];
  /**
   * The sampler; default the one `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` name
   * (`parentbased_always_on` when unset). Whatever it drops is still recorded for lifeline (see
   * `evidence`).
   */
  sampler?: Sampler;
  /**
   * Keeps the evidence whatever the sampler drops (default on): spans the sampler drops are still
   * recorded, so stuck calls are tracked in flight and explained by verdicts, and a trace that
   * turns out to be evidence (a failed or deadline-exceeded call, a span a verdict found in flight)
   * is exported although it was not sampled; verdicts and their snapshots are always sampled. See
   * `EvidenceSampler` and `EvidenceSpanProcessor` for the cost. `false`: the sampler alone decides.
   */
  evidence?: false | EvidenceSpanProcessorOptions;
  /** More instrumentations beside lifeline's (undici/fetch, http, gRPC, pino, or the auto-instrumentations). */
  instrumentations?: Instrumentation[];
  /** Configuration of lifeline's undici/fetch instrumentation (e.g. `headersToSpanAttributes`). */
  undici?: UndiciInstrumentationConfig;
  /** Configuration of lifeline's http instrumentation; probe requests stay untraced. */
  http?: HttpInstrumentationConfig;
  /**
   * Use `@opentelemetry/auto-instrumentations-node` (Express routes, winston/bunyan trace ids,
   * databases…) instead of lifeline's four instrumentations, when the app has it installed; it
   * honours `OTEL_NODE_ENABLED_INSTRUMENTATIONS` / `OTEL_NODE_DISABLED_INSTRUMENTATIONS`. `true`
   * fails if it is not installed; `'if-installed'` (register mode's default) falls back quietly.
   * Default false.
   */
  autoInstrumentations?: boolean | 'if-installed';
  /**
   * Registers the ES module loader hook, limited to the modules the instrumentations patch, so that
   * modules an ES module app imports after this call are instrumented (register mode does it before
   * the app's first import). Default false.
   */
  esmHook?: boolean;
}

export type { Lifeline } from './parts.js';

/**
 * Starts OpenTelemetry's SDK (its NodeSDK when `OTEL_LOGS_EXPORTER` or `OTEL_METRICS_EXPORTER`
 * asks for logs or metrics, i.e. names an exporter other than `none`; for traces alone the same setup, without loading their exporters)
 * wired with everything lifeline has: deadline span
 * attributes, the deadline header beside W3C trace context and baggage, undici/fetch, http, gRPC
 * and pino instrumentation (probe requests untraced), deadlines on every client, the probe server
 * and the catalog. The SDK registers the global tracer provider, propagator and context manager.
 * To add lifeline to an SDK you create yourself, use {@link lifelineParts} instead.
 *
 * @example
 * ```ts
 * import { startLifeline } from 'otel-lifeline/sdk';
 *
 * const lifeline = await startLifeline({ serviceName: 'checkout', deadlines: { defaultTimeoutMs: 10_000 } });
 * ```
 */
export async function startLifeline(options: LifelineOptions = {}): Promise<Lifeline> {
  // A second SDK would fight the first over the globals (and both would wait on the other's SIGTERM);
  // `starting` also refuses a second call made while the first still awaits its modules.
  if (lifelineRunning() || starting)
    throw new LifelineError(
      'ERR_ALREADY_STARTED',
      'lifeline is already started in this process (once shut down, it can start again only with a catalog of its own)',
    );
  starting = true;
  try {
    return await start(options);
  } finally {
    starting = false;
  }
}

let starting = false;

async function start(options: LifelineOptions): Promise<Lifeline> {
  // The SDK is made after the parts (it needs their processors), and stopped by their shutdown;
  // its exporters bound the flush at the process's natural end.
  const owned: { sdk?: { shutdown(): Promise<void> }; exporters?: RetryingExporter[] } = {};
  const watchdog =
    options.watchdog === false || options.serviceName === undefined
      ? options.watchdog
      : { serviceName: options.serviceName, ...options.watchdog };
  warnEnvCorrections(loggerOrDefault(options.logger)); // before anything reads them: each said once, naming the variable
  const parts = assembleParts(
    { ...options, ...(watchdog === undefined ? {} : { watchdog }) },
    () => owned.sdk?.shutdown() ?? Promise.resolve(),
    true, // the watchdog thread boots while the SDK loads
    (flush) => flushAtExit(owned.exporters ?? [], flush),
  );
  let deferred: DeferredInstrumentations | undefined;
  try {
    // Every module first, then every instrumentation at once: see lifelineParts' instrumentations.
    // OpenTelemetry's NodeSDK only when a logs or metrics exporter is asked for: for traces alone
    // lifeline's own setup does the same from the same packages, loading half as many modules.
    const logs = exporterAskedFor('OTEL_LOGS_EXPORTER');
    const metrics = exporterAskedFor('OTEL_METRICS_EXPORTER');
    const tracesOnly = !logs && !metrics && process.env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true';
    const [nodeSdk, chosen, spanProcessors] = await Promise.all([
      tracesOnly ? undefined : import('@opentelemetry/sdk-node'),
      instrumentationsOf(options),
      exportingProcessors(options, owned),
    ]);
    const instrumentations = [...parts.instrumentations, ...chosen.make(parts), ...(options.instrumentations ?? [])];
    deferred = chosen.deferred?.();
    deferred?.start(); // before the app loads a module: see DeferredInstrumentations
    const sampler = options.sampler ?? samplerFromEnv(process.env, loggerOrDefault(options.logger));
    const tracing = {
      sampler: options.evidence === false ? sampler : new EvidenceSampler(sampler),
      spanProcessors: [
        ...parts.spanProcessors,
        ...(options.evidence === false ? spanProcessors : [new EvidenceSpanProcessor(spanProcessors, options.evidence)]),
      ],
      textMapPropagator: parts.propagator,
      idGenerator: parts.idGenerator,
      instrumentations,
      ...(options.serviceName === undefined ? {} : { serviceName: options.serviceName }),
    };
    let sdk: { shutdown(): Promise<void> };
    if (nodeSdk === undefined) {
      sdk = withCorrectedEnv(() => startTracingSdk(tracing));
    } else {
      const config: Partial<NodeSDKConfiguration> = {
        ...tracing,
        // Logs and metrics stay off unless their exporters are asked for: lifeline is about traces.
        ...(logs ? {} : { logRecordProcessors: [] }),
        ...(metrics ? {} : { metricReaders: [] }),
      };
      // The SDK reads the OTEL_* env itself (metric readers, log exporters): it is handed lifeline's corrections.
      const started = withCorrectedEnv(() => new nodeSdk.NodeSDK(config));
      withCorrectedEnv(() => {
        started.start();
      });
      sdk = started;
    }
    deferred?.providersReady();
    owned.sdk = {
      shutdown: () => {
        deferred?.stop();
        return sdk.shutdown();
      },
    };
    refusedRegistration();
    if (options.esmHook) await installEsmHook([...instrumentedModules(instrumentations), ...(deferred?.modules ?? [])], chosen.from);
    return await parts.start();
  } catch (err) {
    deferred?.stop();
    await parts.discard();
    await owned.sdk?.shutdown();
    throw err;
  }
}

/** What {@link instrumentationsOf} chose: what makes the instrumentations, and those that wait for their module. */
interface Chosen {
  make: (parts: LifelineParts) => Instrumentation[];
  /** After `make`: the auto-instrumentations' deferred ones. */
  deferred?: () => DeferredInstrumentations | undefined;
  from?: string;
}

/**
 * Loads lifeline's instrumentations, or the auto-instrumentations, and returns what makes them
 * (configured with lifeline's hooks) without loading anything more.
 */
async function instrumentationsOf(options: LifelineOptions): Promise<Chosen> {
  if (options.autoInstrumentations) {
    const auto = autoInstrumentations(options.autoInstrumentations === true);
    if (auto !== undefined) {
      let deferred: DeferredInstrumentations | undefined;
      return {
        make: (parts) => {
          const made = auto.instrumentations(
            {
              '@opentelemetry/instrumentation-http': parts.httpConfig(options.http),
              '@opentelemetry/instrumentation-undici': options.undici ?? {},
            },
            loggerOrDefault(options.logger),
          );
          deferred = made.deferred;
          return made.now;
        },
        deferred: () => deferred,
        from: auto.from, // the app's copy: its instrumentations hook ES modules through the app's loader copy
      };
    }
  }
  const [{ HttpInstrumentation }, { GrpcInstrumentation }, { UndiciInstrumentation }, { PinoInstrumentation }] = await Promise.all([
    import('@opentelemetry/instrumentation-http'), // not with the auto-instrumentations, which have their own
    import('@opentelemetry/instrumentation-grpc'),
    import('@opentelemetry/instrumentation-undici'),
    import('@opentelemetry/instrumentation-pino'),
  ]);
  return {
    make: (parts) => [
      new GrpcInstrumentation(), // after lifeline's gRPC deadlines (parts.instrumentations), so deadlines reach handlers it wraps
      new UndiciInstrumentation(options.undici),
      new HttpInstrumentation(parts.httpConfig(options.http)),
      new PinoInstrumentation(), // trace_id / span_id on every pino line written inside a span
    ],
  };
}

/**
 * Batched exporters, each retrying what the collector did not take (a collector restart costs no
 * span) and saying once when spans cannot be exported.
 */
async function exportingProcessors(options: LifelineOptions, owned: { exporters?: RetryingExporter[] }): Promise<SpanProcessor[]> {
  if (options.spanProcessors) return options.spanProcessors;
  const logger = loggerOrDefault(options.logger);
  const exporters = options.traceExporter
    ? [new ExportWarningExporter(options.traceExporter, logger, 'traceExporter')]
    : (await traceExportersFromEnv()).map((exporter) => new ExportWarningExporter(exporter, logger, otlpDestination()));
  const tuning = batchTuningFromEnv(process.env, logger); // once, so a bad value is warned about once
  owned.exporters = exporters.map((exporter) => new RetryingExporter(exporter, logger, options.exportBuffer));
  return owned.exporters.map((exporter) => batchProcessorFromEnv(exporter, tuning));
}

/**
 * Throws when OpenTelemetry's globals were stamped by another copy of the API before lifeline
 * registered its own (the API refuses a registration from any other version: an app that called
 * its own `diag.setLogger` first, say): lifeline's tracer provider, context manager and propagator
 * would all be refused, and it would record nothing.
 */
function refusedRegistration(): void {
  const registered = (globalThis as Record<symbol, { version?: unknown } | undefined>)[Symbol.for('opentelemetry.js.api.1')]?.version;
  const own = apiCopyFrom(import.meta.filename)?.version;
  if (typeof registered !== 'string' || own === undefined || registered === own) return;
  throw new LifelineError(
    'ERR_ALREADY_STARTED',
    `OpenTelemetry's globals were first registered by @opentelemetry/api ${registered}, and lifeline's ${own} may not register its own beside them: start lifeline before anything calls the API's set* functions (diag.setLogger…), e.g. with --import otel-lifeline/register, or use @opentelemetry/api ${own}`,
  );
}
