import { context, defaultTextMapGetter, propagation, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { once } from 'node:events';
import type * as Http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentDeadline, DEADLINE_HEADER, DeadlinePropagator, installInboundTrust, LifelineError, type Installed } from 'otel-lifeline';
import { instrumentedHttpServers, listenOn } from '../support/inbound-server.js';

/**
 * Whose x-request-timeout-ms a server obeys, through the real path: a real client (fetch,
 * node:http) -> a node:http server under OpenTelemetry's http instrumentation, which extracts from
 * `request.headers`; installInboundTrust records each request's peer on Node's diagnostics channel.
 */
interface Seen {
  deadline: { at: number; source: string } | null;
  copiedHeaders: { at: number } | null; // the same headers, copied, as some frameworks hand them over
  traceId: string | undefined;
}

const otel = instrumentedHttpServers();
let http: typeof Http;
let trust: Installed;
let server: Http.Server;
let v4: string;
let v6: string | undefined;

beforeAll(async () => {
  http = otel.start();
  trust = installInboundTrust();
  const handler = (req: Http.IncomingMessage, res: Http.ServerResponse): void => {
    const deadline = currentDeadline();
    const copied = context.with(propagation.extract(ROOT_CONTEXT, { ...req.headers }, defaultTextMapGetter), () => currentDeadline());
    const seen: Seen = {
      deadline: deadline === undefined ? null : { at: deadline.at, source: deadline.source },
      copiedHeaders: copied === undefined ? null : { at: copied.at },
      traceId: trace.getActiveSpan()?.spanContext().traceId,
    };
    res.setHeader('content-type', 'application/json').end(JSON.stringify(seen));
  };
  server = http.createServer(handler);
  v4 = (await listenOn(server, '127.0.0.1')) ?? '';
  const server6 = http.createServer(handler);
  v6 = await listenOn(server6, '::1');
  servers.push(server6);
});
const servers: Http.Server[] = [];
afterAll(async () => {
  trust.uninstall();
  otel.stop();
  for (const s of [server, ...servers]) {
    s.closeAllConnections();
    s.close();
  }
  await Promise.all([server, ...servers].filter((s) => s.listening).map((s) => once(s, 'close')));
});

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const headers = (budget: string): Record<string, string> => ({
  [DEADLINE_HEADER]: budget,
  traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01`,
});

async function viaFetch(url: string, budget: string): Promise<Seen> {
  const res = await fetch(url, { headers: headers(budget) });
  return (await res.json()) as Seen;
}

async function viaNodeHttp(url: string, budget: string): Promise<Seen> {
  const req = http.get(url, { headers: headers(budget) });
  const [res] = (await once(req, 'response')) as [Http.IncomingMessage];
  let body = '';
  for await (const chunk of res) body += String(chunk);
  return JSON.parse(body) as Seen;
}

describe('inbound deadline trust over real HTTP', () => {
  it.each([
    ['fetch', viaFetch],
    ['node:http', viaNodeHttp],
  ])("default 'private': a loopback caller's budget becomes the handler's deadline (%s)", async (client, call) => {
    otel.useDeadlineOptions({});
    const before = Date.now();
    const seen = await call(v4, '5000');
    expect(seen.deadline?.source).toBe('inbound');
    expect(seen.deadline?.at).toBeGreaterThanOrEqual(before + 5_000);
    expect(seen.deadline?.at).toBeLessThanOrEqual(Date.now() + 5_000);
    // The http instrumentation's client span replaces the traceparent node:http sends.
    if (client === 'fetch') expect(seen.traceId).toBe(TRACE_ID);
  });

  it("a sidecar's budget (Envoy's x-envoy-expected-rq-timeout-ms, Connect's Connect-Timeout-Ms) is obeyed from a trusted caller, not from others", async () => {
    otel.useDeadlineOptions({});
    for (const header of ['X-Envoy-Expected-Rq-Timeout-Ms', 'Connect-Timeout-Ms']) {
      const before = Date.now();
      const res = await fetch(v4, { headers: { [header]: '2500' } });
      const seen = (await res.json()) as Seen;
      expect(seen.deadline?.source).toBe('inbound');
      expect(seen.deadline?.at).toBeGreaterThanOrEqual(before + 2_500);
      expect(seen.deadline?.at).toBeLessThanOrEqual(Date.now() + 2_500);
    }
    otel.useDeadlineOptions({ trustInbound: 'none' });
    const refused = (await (await fetch(v4, { headers: { 'x-envoy-expected-rq-timeout-ms': '1' } })).json()) as Seen;
    expect(refused.deadline).toBeNull();
  });

  it.each([
    ["a list that leaves loopback out (['10.0.0.0/8'])", { trustInbound: ['10.0.0.0/8'] }],
    ["'none'", { trustInbound: 'none' }],
  ] as const)('an untrusted caller: %s -> the handler has no deadline, the trace still continues', async (_case, options) => {
    otel.useDeadlineOptions(options);
    const seen = await viaFetch(v4, '1');
    expect(seen.deadline).toBeNull();
    expect(seen.traceId).toBe(TRACE_ID); // only the deadline is refused, not the caller's trace
    expect((await viaNodeHttp(v4, '1')).deadline).toBeNull();
  });

  it('a list naming the caller trusts it (an address and a range)', async () => {
    otel.useDeadlineOptions({ trustInbound: ['192.0.2.7', '127.0.0.0/8'] });
    expect((await viaFetch(v4, '5000')).deadline?.source).toBe('inbound');
  });

  it('IPv6 loopback ::1: private by default; an IPv4-only list leaves it out; a v6 list names it', async (test) => {
    if (v6 === undefined) test.skip('no IPv6 loopback here');
    const url = v6 ?? '';
    otel.useDeadlineOptions({});
    expect((await viaFetch(url, '5000')).deadline?.source).toBe('inbound');
    otel.useDeadlineOptions({ trustInbound: ['10.0.0.0/8', '127.0.0.1'] });
    expect((await viaFetch(url, '5000')).deadline).toBeNull();
    otel.useDeadlineOptions({ trustInbound: ['::1/128'] });
    expect((await viaFetch(url, '5000')).deadline?.source).toBe('inbound');
  });

  it('minInboundMs raises a budget of 1 ms to the minimum; maxInboundMs still clamps', async () => {
    otel.useDeadlineOptions({ minInboundMs: 2_000, maxInboundMs: 10_000 });
    let before = Date.now();
    const raised = await viaFetch(v4, '1');
    expect(raised.deadline?.source).toBe('inbound');
    expect(raised.deadline?.at).toBeGreaterThanOrEqual(before + 2_000);
    expect(raised.deadline?.at).toBeLessThanOrEqual(Date.now() + 2_000);
    before = Date.now();
    const clamped = await viaFetch(v4, '60000');
    expect(clamped.deadline?.at).toBeGreaterThanOrEqual(before + 10_000);
    expect(clamped.deadline?.at).toBeLessThanOrEqual(Date.now() + 10_000);
  });

  it("headers copied by a framework have no recorded caller: ignored unless trustInbound is 'all'", async () => {
    otel.useDeadlineOptions({});
    const seen = await viaFetch(v4, '5000');
    expect(seen.deadline?.source).toBe('inbound');
    expect(seen.copiedHeaders).toBeNull();
    otel.useDeadlineOptions({ trustInbound: 'all' });
    expect((await viaFetch(v4, '5000')).copiedHeaders).not.toBeNull();
  });

  it('with nothing recording callers, private trust obeys no one and says so once', async () => {
    otel.useDeadlineOptions({});
    trust.uninstall();
    try {
      const warned = once(process, 'warning');
      expect((await viaFetch(v4, '5000')).deadline).toBeNull();
      const [warning] = (await warned) as [Error & { code?: string }];
      expect(warning.code).toBe('LIFELINE_INBOUND_PEER_UNKNOWN');
      expect(warning.message).toContain('installInboundTrust()');
    } finally {
      trust = installInboundTrust();
    }
    expect((await viaFetch(v4, '5000')).deadline?.source).toBe('inbound');
  });

  it('installs nest: one uninstall leaves the other recording', async () => {
    otel.useDeadlineOptions({});
    const second = installInboundTrust();
    second.uninstall();
    second.uninstall(); // idempotent: must not undo the first install
    expect((await viaFetch(v4, '5000')).deadline?.source).toBe('inbound');
  });
});

describe('trust options are validated', () => {
  it.each([
    [{ trustInbound: ['10.0.0.0/33'] }, /invalid trustInbound\[0\]: "10.0.0.0\/33"/],
    [{ trustInbound: ['10.0.0.0/8', 'fd00::/129'] }, /invalid trustInbound\[1\]: "fd00::\/129"/],
    [{ trustInbound: ['10.0.0/8'] }, /invalid trustInbound\[0\]/],
    [{ trustInbound: ['example.com'] }, /invalid trustInbound\[0\]/],
    [{ trustInbound: [42] }, /invalid trustInbound\[0\]: 42/],
    [{ trustInbound: 'privat' }, /invalid trustInbound: "privat"/],
    [{ trustInbound: '10.0.0.0/8' }, /invalid trustInbound/], // a list, not a string
    [{ minInboundMs: -1 }, /invalid minInboundMs: -1/],
    [{ minInboundMs: 20_000, maxInboundMs: 10_000 }, /invalid minInboundMs: 20000/],
    [{ minInboundMs: Number.NaN }, /invalid minInboundMs: NaN/],
  ])('%j is rejected with a LifelineError naming the option', (options, message) => {
    const make = () => new DeadlinePropagator(options as never);
    expect(make).toThrow(LifelineError);
    expect(make).toThrow(message);
  });

  it('accepts IPv4, IPv6 and IPv4-mapped entries, bare or with a prefix', () => {
    expect(
      () =>
        new DeadlinePropagator({
          trustInbound: ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', 'fe80::1', '::ffff:10.0.0.0/104', '0.0.0.0/0'],
        }),
    ).not.toThrow();
    expect(() => new DeadlinePropagator({ trustInbound: [] })).not.toThrow();
  });
});
