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

beforeAll(async () => {
  receiver = await otlpReceiver();
  dir = (await installService('cjs-express-winston-auto', inject('lifelineTarball'))).dir;
});
afterAll(async () => {
  await receiver.close();
  await removeDir(dir);
});

// lifeline makes the instrumentations of Express and winston only when the app loads them (the
// package's other ~30 are never loaded): from require and from import alike.
describe.each([
  ['CommonJS', 'src/server.js'],
  ['ES module', 'src/server.mjs'],
])('register mode with the auto-instrumentations installed (Express 5, winston), %s', (kind, main) => {
  let service: StartedService | undefined;
  beforeAll(async () => {
    service = await startService(
      dir ?? '',
      ['--import', 'otel-lifeline/register', main],
      serviceEnv({
        OTEL_SERVICE_NAME: `orders-${kind}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        LIFELINE_PROBE_PORT: '0',
      }),
    );
  });
  afterAll(async () => {
    if (service !== undefined) await stopChild(service.child);
  });

  it('names server spans by Express route and puts trace ids on winston lines', async () => {
    const res = await fetch(`http://127.0.0.1:${String(service?.port)}/orders/42`);
    expect(await res.json()).toEqual({ id: '42', status: 'shipped' });
    const mine = (s: { kind: number; name: string; service: string }): boolean =>
      s.kind === SERVER && s.name === 'GET /orders/:id' && s.service === `orders-${kind}`;
    const spans = await receiver.waitFor((all) => all.some(mine));
    const server = spans.find(mine);
    expect(server?.attributes['http.route']).toBe('/orders/:id');
    const line = (service?.output() ?? '').split('\n').find((l) => l.includes('order looked up'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({ order: '42', trace_id: server?.traceId });
  });
});
