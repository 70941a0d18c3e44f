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
});
