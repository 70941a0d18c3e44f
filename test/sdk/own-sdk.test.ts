import { describe, expect, it } from 'vitest';
import { otlpReceiver } from '../support/otlp-receiver.js';
import { startService } from '../support/service.js';
import { serve, stallsBody } from '../support/servers.js';

const SERVER = 2;
const CLIENT = 3;

describe("lifeline's parts in an SDK the app creates itself (NodeSDK + auto-instrumentations, CommonJS)", () => {
  it('bounds fetch by the deadline, marks its span, serves probes untraced, and shuts down cleanly', async () => {
    const receiver = await otlpReceiver();
    const upstream = await serve(stallsBody);
    const app = await startService('test/fixtures/own-sdk-service.cjs', {
      OTEL_SERVICE_NAME: 'own-sdk',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    });
    try {
      const res = await fetch(`${app.url}/call?url=${encodeURIComponent(`${upstream.url}/`)}`);
      expect(res.status).toBe(504);
      const live = await fetch(`http://127.0.0.1:${String(app.first.probePort)}/live`);
      expect(live.status).toBe(200);
      const spans = await receiver.waitFor((all) =>
        all.some((s) => s.kind === CLIENT && s.attributes['lifeline.deadline.exceeded'] === true),
      );
      const client = spans.find((s) => s.kind === CLIENT && s.attributes['lifeline.deadline.exceeded'] === true);
      expect(client?.attributes['lifeline.deadline.source']).toBe('scope');
      expect(client?.attributes['error.type']).toBe('timeout');
      await app.stop(); // flushes
      const servers = receiver.spans.filter((s) => s.kind === SERVER);
      expect(servers.map((s) => s.attributes['url.path'] ?? s.attributes['http.target'])).toEqual([expect.stringMatching(/^\/call/)]); // the probe request is not traced
    } finally {
      await app.stop();
      await upstream.close();
      await receiver.close();
    }
    expect(app.stderr()).toBe('');
  });

  it("honours the caller's deadline and tells the upstream (the propagator), and a stuck tick's verdict exports its in-flight spans (diagnostics, idGenerator)", async () => {
    const receiver = await otlpReceiver();
    const told: string[] = [];
    const upstream = await serve((req, res) => {
      told.push(String(req.headers['x-request-timeout-ms'] ?? '-'));
      stallsBody(req, res);
    });
    const app = await startService('test/fixtures/own-sdk-service.cjs', {
      OTEL_SERVICE_NAME: 'own-sdk-verdict',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      LIFELINE_HEALTH_INTERVAL_MS: '200',
    });
    try {
      // On a loaded machine the caller's 100 ms may be spent before the app makes its call (then the
      // call is not made at all, and the upstream is told nothing): asked again, at most 5 times.
      for (let attempt = 0; attempt < 5 && told.length === 0; attempt++) {
        const started = performance.now();
        const res = await fetch(`${app.url}/call?url=${encodeURIComponent(`${upstream.url}/`)}`, {
          headers: { 'x-request-timeout-ms': '100' },
        });
        expect(res.status).toBe(504);
        expect(performance.now() - started).toBeLessThan(290); // the caller's 100 ms, not the app's 300
      }
      expect(Number(told[0])).toBeGreaterThan(0);
      expect(Number(told[0])).toBeLessThanOrEqual(100);

      expect(await (await fetch(`${app.url}/stick`)).text()).toBe('stuck');
      const spans = await receiver
        .waitFor(
          (all) => all.some((s) => s.name.startsWith('wait for lock (in flight') && s.attributes['lifeline.in_flight'] === true),
          10_000,
        )
        .catch((err: unknown) => {
          throw new Error(
            `${String(err)}; spans: ${receiver.spans.map((s) => s.name).join(', ')}; stdout: ${app.stdout()}; stderr: ${app.stderr()}`,
          );
        });
      const waiting = spans.find((s) => s.name.startsWith('wait for lock (in flight') && s.attributes['lifeline.in_flight'] === true);
      const tick = spans.find((s) => s.name.startsWith('tick stuck (in flight') && s.attributes['lifeline.in_flight'] === true);
      // With lifeline's idGenerator the stuck tick's snapshot roots the tick's own trace.
      expect(tick?.traceId).toBe(waiting?.traceId);
      expect(spans.some((s) => s.name.startsWith('health verdict'))).toBe(true);
      const live = await fetch(`http://127.0.0.1:${String(app.first.probePort)}/live`);
      expect(live.status).toBe(503);
    } finally {
      await app.stop();
      await upstream.close();
      await receiver.close();
    }
  });
});
