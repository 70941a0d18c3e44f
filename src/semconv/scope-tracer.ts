import { trace, type Tracer, type TracerProvider } from '@opentelemetry/api';
import { SCOPE_NAME } from './names.js';

/**
 * lifeline's tracer: `provider`'s, or else the global provider's as it is when a span starts.
 * A tracer taken from the global provider before an SDK registered is tied to this copy of the
 * OpenTelemetry API: an app whose SDK loaded the API's other build (CommonJS beside lifeline's ES
 * modules) would register its provider where that tracer never looks, and every tick and verdict
 * span would be a no-op. Looking the global up per span costs a map lookup.
 */
export function scopeTracer(provider?: TracerProvider): Tracer {
  if (provider !== undefined) return provider.getTracer(SCOPE_NAME);
  return {
    startSpan: (name, options, context) => trace.getTracer(SCOPE_NAME).startSpan(name, options, context),
    startActiveSpan: (...args: unknown[]): never => {
      const tracer = trace.getTracer(SCOPE_NAME) as unknown as { startActiveSpan(...args: unknown[]): never };
      return tracer.startActiveSpan(...args);
    },
  };
}
