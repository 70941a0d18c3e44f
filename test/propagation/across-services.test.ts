import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CUT_BOUND_MS, within } from '../support/cut.js';
import { otlpReceiver } from '../support/otlp-receiver.js';
import { startService, type ChildService } from '../support/service.js';

const SCRIPT = 'test/fixtures/relay-service.mjs';
/**
 * For comparing readings of different clocks, each rounded to whole ms: the wall clock (`Date.now()`,
 * deadlines) and a span's clock (process start + monotonic time), ~1 ms apart; three processes. Not
 * a margin for scheduling: a loaded machine only makes the later events later.
 */
const CLOCKS_MS = 5;
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

describe('deadlines across three real services A -> B -> C (docs/deadlines.md)', () => {
  it("C stalls; A's withTimeout(500) makes B's call to C abort at A's deadline; B's spans say inbound", async () => {
    const [a] = services;
    // C never answers: only a deadline ends the chain. A's answer is bounded so that a broken one fails here.
    const res = await within(
      500 + CUT_BOUND_MS,
      `A was still waiting ${String(CUT_BOUND_MS)} ms after its deadline`,
      fetch(`${a?.url ?? ''}/start`),
    );
    const report = (await res.json()) as { aborted: boolean; deadlineAt: number; elapsedMs: number };
    expect(res.status).toBe(504);
    expect(report.aborted).toBe(true); // ended by its deadline, said A's error
    expect(report.elapsedMs).toBeGreaterThanOrEqual(500); // and not before it, on A's monotonic clock

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
    // B's call ended (its span was exported, cut by its deadline: above), and not before A's deadline.
    expect(bClient?.endMs).toBeGreaterThanOrEqual(report.deadlineAt - CLOCKS_MS);
    // B's inbound deadline is A's, carried as a relative budget: later only by the time from A
    // reading its budget for the header to B reading the header. A reads it after it started the
    // call (its deadline less the 500 ms), before its client span starts; B reads it before its
    // server span starts. (From A's client span instead, a pause between the header and that span
    // under load made B's deadline look 2 ms too late in CI.)
    const bDeadline = Date.parse(String(bClient?.attributes['lifeline.deadline.at']));
    const transit = (bServer?.startMs ?? Number.NaN) - (report.deadlineAt - 500);
    expect(bDeadline).toBeGreaterThanOrEqual(report.deadlineAt - 1);
    expect(bDeadline).toBeLessThanOrEqual(report.deadlineAt + transit + CLOCKS_MS);
    // One trace across the hops.
    expect(bClient?.traceId).toBe(aClient?.traceId);
    expect(aClient?.attributes['lifeline.deadline.source']).toBe('scope');
  });
});
