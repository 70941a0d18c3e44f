/**
 * A service that has @opentelemetry/auto-instrumentations-node installed (Express, winston), started
 * with register mode from the packed tarball: Express routes name the server spans and winston's
 * lines carry the trace ids, as users of OpenTelemetry's own register expect, with lifeline's
 * deadlines and probes on top.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { otlpReceiver } from '../support/otlp-receiver.js';
import { installService, removeDir, serviceEnv, startService, stopChild, type StartedService } from './support.js';

const SERVER = 2;
let dir: string | undefined;
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
let service: StartedService | undefined;

beforeAll(async () => {
  receiver = await otlpReceiver();
  dir = (await installService('cjs-express-winston-auto', inject('lifelineTarball'))).dir;
  service = await startService(
    dir,
    ['--import', 'otel-lifeline/register', 'src/server.js'],
    serviceEnv({
      OTEL_SERVICE_NAME: 'orders',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      LIFELINE_PROBE_PORT: '0',
    }),
  );
});
afterAll(async () => {
  if (service !== undefined) await stopChild(service.child);
  await receiver.close();
  await removeDir(dir);
});

describe('register mode with the auto-instrumentations installed (Express 5, winston)', () => {
  it('names server spans by Express route and puts trace ids on winston lines', async () => {
    const res = await fetch(`http://127.0.0.1:${String(service?.port)}/orders/42`);
    expect(await res.json()).toEqual({ id: '42', status: 'shipped' });
    const spans = await receiver.waitFor((all) => all.some((s) => s.kind === SERVER && s.name === 'GET /orders/:id'));
    const server = spans.find((s) => s.kind === SERVER && s.name === 'GET /orders/:id');
    expect(server?.attributes['http.route']).toBe('/orders/:id');
    const line = (service?.output() ?? '').split('\n').find((l) => l.includes('order looked up'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({ order: '42', trace_id: server?.traceId });
  });
});
