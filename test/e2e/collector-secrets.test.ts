import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalStack, type LocalStack } from '../../otel-collector/local-stack.mjs';
import { eventually, findTraces } from '../support/jaeger.js';

// The collector's second line of defence (otel-collector/config.yaml, attributes/secrets), on its
// own: spans from a plain OpenTelemetry SDK, no lifeline redaction, read back from Jaeger.
let stack: LocalStack;
beforeAll(async () => {
  stack = await startLocalStack({ base: 23_000 + (process.pid % 300) * 10 });
});
afterAll(async () => {
  await stack.stop();
});

const SECRET_KEYS = [
  'http.request.header.authorization',
  'http.request.header.proxy-authorization',
  'http.request.header.cookie',
  'http.response.header.set-cookie',
  'http.request.header.x-api-key',
  'db.password',
  'app.client_secret',
  'app.refresh_token',
  'http.request.header.x-csrf-token',
  'app.token',
  'app.accessToken.value',
  'app.api-key',
  'user.jsessionid',
  'aws.credentials',
];
const KEPT_KEYS = [
  'app.author',
  'app.country_code',
  'app.design',
  'app.keyboard',
  'app.signal',
  'token_count',
  'gen_ai.usage.input_tokens',
  'db.system.name',
  'url.full',
];

describe('the collector deletes credential-named attributes of any SDK', () => {
  it('keys naming a credential by a whole segment are gone in Jaeger; look-alikes stay', async () => {
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'collector-secrets' }),
      spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${stack.otlpHttpEndpoint}/v1/traces` }) })],
    });
    const attributes = Object.fromEntries([...SECRET_KEYS, ...KEPT_KEYS].map((key) => [key, `value-of-${key}`]));
    provider.getTracer('t').startSpan('planted', { attributes }).end();
    await provider.forceFlush();
    await provider.shutdown();

    const traces = await eventually(
      () => findTraces(stack.queryUrl, 'collector-secrets'),
      (t) => t.length > 0,
    );
    const span = traces[0]?.spans.find((s) => s.operationName === 'planted');
    const keys = new Set(span?.tags.map((tag) => tag.key));
    expect(SECRET_KEYS.filter((key) => keys.has(key))).toEqual([]);
    expect(KEPT_KEYS.filter((key) => !keys.has(key))).toEqual([]);
  });
});
