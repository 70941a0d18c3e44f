import { context, diag, DiagConsoleLogger, propagation, trace, type TextMapPropagator } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { diagLogLevelFromString, getNumberFromEnv, getStringFromEnv, getStringListFromEnv } from '@opentelemetry/core';
import { registerInstrumentations, type Instrumentation } from '@opentelemetry/instrumentation';
import {
  defaultResource,
  detectResources,
  envDetector,
  hostDetector,
  osDetector,
  processDetector,
  resourceFromAttributes,
  serviceInstanceIdDetector,
  type ResourceDetector,
} from '@opentelemetry/resources';
import { TracerProvider, type IdGenerator, type Sampler, type SpanProcessor } from '@opentelemetry/sdk-trace';

/** What {@link startTracingSdk} sets up: traces only. */
export interface TracingSdkConfig {
  sampler: Sampler;
  spanProcessors: SpanProcessor[];
  textMapPropagator: TextMapPropagator;
  idGenerator: IdGenerator;
  instrumentations: Instrumentation[];
  serviceName?: string;
}

/** A started tracing SDK: {@link TracingSdk.shutdown} flushes and stops its tracer provider. */
export interface TracingSdk {
  shutdown(): Promise<void>;
}

// In NodeSDK's order: a later detector wins a conflict, so the environment's attributes
// (OTEL_RESOURCE_ATTRIBUTES) come last and override what the others detect.
const DETECTORS: Readonly<Record<string, ResourceDetector>> = {
  host: hostDetector,
  os: osDetector,
  serviceinstance: serviceInstanceIdDetector,
  process: processDetector,
  env: envDetector,
};

/**
 * What OpenTelemetry's NodeSDK does for traces when no logs or metrics exporter is asked for, from
 * the same packages and the same `OTEL_*` variables (`OTEL_LOG_LEVEL`, `OTEL_NODE_RESOURCE_DETECTORS`,
 * the span limits), without loading what it would not use: NodeSDK imports every logs, metrics and
 * trace exporter it could make (grpc-js, protobuf, Prometheus, Zipkin, a YAML parser: ~400 modules),
 * about half of a register-mode start-up. Registers the tracer provider, an AsyncLocalStorage
 * context manager and the propagator, and enables the instrumentations.
 */
export function startTracingSdk(config: TracingSdkConfig): TracingSdk {
  const logLevel = getStringFromEnv('OTEL_LOG_LEVEL');
  if (logLevel !== undefined) diag.setLogger(new DiagConsoleLogger(), diagLogLevelFromString(logLevel));
  registerInstrumentations({ instrumentations: config.instrumentations });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(config.textMapPropagator);
  let resource = defaultResource().merge(detectResources({ detectors: detectorsFromEnv() }));
  if (config.serviceName !== undefined) resource = resource.merge(resourceFromAttributes({ 'service.name': config.serviceName }));
  const provider = new TracerProvider({
    sampler: config.sampler,
    spanLimits: spanLimitsFromEnv(),
    resource,
    idGenerator: config.idGenerator,
    spanProcessors: config.spanProcessors,
  });
  trace.setGlobalTracerProvider(provider);
  return { shutdown: () => provider.shutdown() };
}

/** `OTEL_NODE_RESOURCE_DETECTORS` as NodeSDK reads it; unset: env, process and host. */
function detectorsFromEnv(): ResourceDetector[] {
  const names = getStringListFromEnv('OTEL_NODE_RESOURCE_DETECTORS');
  if (names === undefined || names.length === 0) return [envDetector, processDetector, hostDetector];
  if (names.includes('all')) return Object.values(DETECTORS);
  if (names.includes('none')) return [];
  return names.flatMap((name) => {
    const detector = Object.hasOwn(DETECTORS, name) ? DETECTORS[name] : undefined;
    if (detector === undefined)
      diag.warn(`Invalid resource detector "${name}" specified in the environment variable OTEL_NODE_RESOURCE_DETECTORS`);
    return detector === undefined ? [] : [detector];
  });
}

function spanLimitsFromEnv(): Record<string, number | undefined> {
  return {
    attributeCountLimit: getNumberFromEnv('OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT') ?? getNumberFromEnv('OTEL_ATTRIBUTE_COUNT_LIMIT'),
    attributeValueLengthLimit:
      getNumberFromEnv('OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT') ?? getNumberFromEnv('OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT'),
    eventCountLimit: getNumberFromEnv('OTEL_SPAN_EVENT_COUNT_LIMIT'),
    linkCountLimit: getNumberFromEnv('OTEL_SPAN_LINK_COUNT_LIMIT'),
    attributePerEventCountLimit: getNumberFromEnv('OTEL_SPAN_ATTRIBUTE_PER_EVENT_COUNT_LIMIT'),
    attributePerLinkCountLimit: getNumberFromEnv('OTEL_SPAN_ATTRIBUTE_PER_LINK_COUNT_LIMIT'),
  };
}
