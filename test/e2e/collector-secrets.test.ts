import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCollectorTier, startLocalStack, type LocalStack } from '../../otel-collector/local-stack.mjs';
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

/** The `- pattern:` lines of a collector config's attributes/secrets processor. */
function keyPatterns(config: string): string[] {
  const text = readFileSync(new URL(`../../otel-collector/${config}`, import.meta.url), 'utf8');
  const block = text.slice(text.indexOf('attributes/secrets:'), text.indexOf('\n  batch:'));
  return [...block.matchAll(/- pattern: (.+)/g)].map((m) => (m[1] ?? '').trim());
}

// Secrets inside values, in the forms an adversarial pass got through lifeline 0.1: each holds
// "SECRET"; none may reach Jaeger. Harmless look-alikes must arrive whole.
const VALUE_SECRETS: Record<string, string> = {
  'http.response.body': '{"error":"invalid_grant","refresh_token":"rt-SECRET-1"}',
  'app.header_dump': 'Authorization: Token SECRET-2',
  'db.query.text': "ALTER USER app WITH password='SECRET-3'",
  'app.note': 'connect.sid=SECRET-4; theme=dark',
  'app.session': 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.SECRET-5-sig',
  'url.full': 'https://api.example.com/cb;jsessionid=SECRET-6?code=1&api_key=SECRET-7&page=2',
  'app.retry': 'failed: authorization=SECRET-12 (retry)', // no scheme: the word is the credential
};
const VALUE_KEPT: Record<string, string> = {
  'app.query': 'author=jane&country_code=de&design=flat&signal=1',
  'app.text': 'the token count is 42; a password policy applies',
};

describe("the agent tier (agent.yaml on lifeline's collector) scrubs credentials in values and span names too", () => {
  it('the key rule is the same in the agent and the single collector', () => {
    expect(keyPatterns('agent.yaml')).toHaveLength(2);
    expect(keyPatterns('agent.yaml')).toEqual(keyPatterns('config.yaml'));
  });

  it('secrets in attribute values, event attributes and the span name are REDACTED in Jaeger; look-alikes stay', async () => {
    const badgerDir = mkdtempSync(join(tmpdir(), 'lifeline-badger-'));
    // Below the ephemeral range (32768–60999): a port there can be taken by any outgoing connection.
    const tier = await startCollectorTier({ base: 17_000 + (process.pid % 300) * 10, badgerDir, decisionWait: '1s', routinePercent: 100 });
    try {
      const provider = new TracerProvider({
        resource: resourceFromAttributes({ 'service.name': 'agent-secrets' }),
        spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${tier.otlpHttpEndpoint}/v1/traces` }) })],
      });
      const span = provider.getTracer('t').startSpan('GET /callback?token=SECRET-8&state=ok', {
        attributes: { ...VALUE_SECRETS, ...VALUE_KEPT },
      });
      span.addEvent('exception', { 'exception.message': 'login failed for password=SECRET-9' });
      span.addEvent('upstream answered', { body: '{"password":"SECRET-10"}', request: 'Authorization: Bearer SECRET-11' });
      span.end();
      await provider.forceFlush();
      await provider.shutdown();

      const traces = await eventually(
        () => findTraces(tier.queryUrl, 'agent-secrets'),
        (t) => t.length > 0,
      );
      const got = traces[0]?.spans[0];
      expect(got?.operationName).toBe('GET /callback?token=REDACTED&state=ok');
      const tags = Object.fromEntries((got?.tags ?? []).map((tag) => [tag.key, String(tag.value)]));
      const events = (got?.logs ?? []).flatMap((log) => log.fields.map((f) => String(f.value)));
      expect(JSON.stringify({ tags, events, name: got?.operationName })).not.toContain('SECRET');
      for (const key of Object.keys(VALUE_SECRETS)) expect(tags[key], key).toContain('REDACTED');
      expect(tags['url.full']).toBe('https://api.example.com/cb;jsessionid=REDACTED?code=1&api_key=REDACTED&page=2');
      expect(events).toContain('login failed for password=REDACTED');
      expect(events).toContain('{"password":"REDACTED"}');
      expect(events).toContain('Authorization: Bearer REDACTED');
      for (const [key, value] of Object.entries(VALUE_KEPT)) expect(tags[key], key).toBe(value);
    } finally {
      await tier.stop();
      rmSync(badgerDir, { recursive: true, force: true });
    }
  });
});
