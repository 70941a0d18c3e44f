import {
  context,
  propagation,
  trace,
  type Context,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import type * as Http from 'node:http';
import { createRequire } from 'node:module';
import { once } from 'node:events';
import { DeadlinePropagator, type InboundDeadlineOptions } from 'otel-lifeline';

/**
 * A service's server side as the SDK sets it up: OpenTelemetry's http instrumentation (which calls
 * `propagation.extract(ctx, request.headers)` as a request arrives), W3C trace context and baggage,
 * and lifeline's DeadlinePropagator — whose options a test switches with `useDeadlineOptions`.
 */
export function instrumentedHttpServers() {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const instrumentation = new HttpInstrumentation();
  let deadlines = new DeadlinePropagator();
  const w3c = [new W3CTraceContextPropagator(), new W3CBaggagePropagator()];
  const switchable: TextMapPropagator = {
    inject(ctx: Context, carrier: unknown, setter: TextMapSetter) {
      for (const p of [...w3c, deadlines]) p.inject(ctx, carrier, setter);
    },
    extract(ctx: Context, carrier: unknown, getter: TextMapGetter) {
      return [...w3c, deadlines].reduce((current, p) => p.extract(current, carrier, getter), ctx);
    },
    fields: () => [...w3c, deadlines].flatMap((p) => p.fields()),
  };
  return {
    exporter,
    tracer: provider.getTracer('test'),
    start(): typeof Http {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      trace.setGlobalTracerProvider(provider);
      propagation.setGlobalPropagator(switchable);
      instrumentation.setTracerProvider(provider);
      instrumentation.enable();
      // Required after enabling, as a service under register mode would: the server's emit is patched.
      return createRequire(import.meta.url)('node:http') as typeof Http;
    },
    useDeadlineOptions(options: InboundDeadlineOptions): void {
      deadlines = new DeadlinePropagator(options);
    },
    stop(): void {
      instrumentation.disable();
    },
  };
}

/** Listens on `host` (port 0); `undefined` when that address is not available here (no IPv6). */
export async function listenOn(server: Http.Server, host: string): Promise<string | undefined> {
  try {
    server.listen(0, host);
    await once(server, 'listening');
  } catch {
    return undefined;
  }
  const { port } = server.address() as { port: number };
  return `http://${host.includes(':') ? `[${host}]` : host}:${String(port)}`;
}
