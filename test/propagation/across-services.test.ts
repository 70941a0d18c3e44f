import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { otlpReceiver } from '../support/otlp-receiver.js';
import { startService, type ChildService } from '../support/service.js';

const SCRIPT = 'test/fixtures/relay-service.mjs';
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
const services: ChildService[] = [];

beforeAll(async () => {
  receiver = await otlpReceiver();
  const otel = {
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    LIFELINE_PROBE_PORT: '0',
  };
  const start = (env: NodeJS.ProcessEnv) => startService(SCRIPT, { ...otel, ...env }, ['--import', 'otel-lifeline/register']);
  const c = await start({ OTEL_SERVICE_NAME: 'svc-c' });
  const b = await start({ OTEL_SERVICE_NAME: 'svc-b', NEXT_URL: c.url });
  const a = await start({ OTEL_SERVICE_NAME: 'svc-a', NEXT_URL: b.url, TIMEOUT_MS: '500' });
  services.push(a, b, c);
});
afterAll(async () => {
  await Promise.all(services.map((s) => s.stop()));
  await receiver.close();
});

describe('deadlines across three real services A -> B -> C (README: Deadlines on every remote call)', () => {
  it("C stalls; A's withTimeout(500) makes B's call to C abort at A's deadline; B's spans say inbound", async () => {
    const [a] = services;
    const started = Date.now();
    const res = await fetch(`${a?.url ?? ''}/start`);
    const report = (await res.json()) as { aborted: boolean; deadlineAt: number; endedAt: number };
    expect(res.status).toBe(504);
    expect(report.aborted).toBe(true);
    expect(report.endedAt - started).toBeLessThan(2_000);

    const CLIENT = 3;
    const SERVER = 2;
    // Both callers' client spans end at A's deadline; each service exports its own batch.
    const spans = await receiver.waitFor(
      (all) =>
        all.some((s) => s.service === 'svc-b' && s.kind === CLIENT && s.attributes['lifeline.deadline.exceeded'] === true) &&
        all.some((s) => s.service === 'svc-a' && s.kind === CLIENT),
    );
    const bClient = spans.find((s) => s.service === 'svc-b' && s.kind === CLIENT);
    const bServer = spans.find((s) => s.service === 'svc-b' && s.kind === SERVER);
    const aClient = spans.find((s) => s.service === 'svc-a' && s.kind === CLIENT);
    expect(bServer?.attributes['lifeline.deadline.source']).toBe('inbound');
    expect(bClient?.attributes['lifeline.deadline.source']).toBe('inbound');
    expect(bClient?.attributes['error.type']).toBe('timeout');
    expect(bClient?.statusCode).toBe(2); // ERROR
    // B's call ended at A's deadline: never after it (beyond timer slack), and not long before it.
    expect(bClient?.endMs).toBeLessThanOrEqual(report.deadlineAt + 100);
    expect(bClient?.endMs).toBeGreaterThanOrEqual(report.deadlineAt - 150);
    // B's inbound deadline is A's, carried as a relative budget: later only by the one-way transit time.
    const bDeadline = Date.parse(String(bClient?.attributes['lifeline.deadline.at']));
    expect(bDeadline).toBeGreaterThanOrEqual(report.deadlineAt - 1);
    expect(bDeadline).toBeLessThanOrEqual(report.deadlineAt + 100);
    // One trace across the hops.
    expect(bClient?.traceId).toBe(aClient?.traceId);
    expect(aClient?.attributes['lifeline.deadline.source']).toBe('scope');
  });
});
