import { propagation } from '@opentelemetry/api';
import http from 'node:http';
import http2 from 'node:http2';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import * as undici from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  DeadlinePropagator,
  installDeadlineDispatcher,
  installHttp2Deadlines,
  installHttpDeadlines,
  LifelineError,
  withTimeout,
} from '../../src/index.js';

/**
 * `envoyUpstreamTimeout`: calls that tell an internal host their budget as x-request-timeout-ms
 * also carry it as Envoy's x-envoy-upstream-rq-timeout-ms (so a sidecar ends them at the deadline
 * too), from every client family lifeline bounds, against real loopback servers that record what
 * they receive. Off by default.
 */
const ENVOY = 'x-envoy-upstream-rq-timeout-ms';
const OURS = 'x-request-timeout-ms';
const seen = new Map<string, Record<string, unknown>>();
let h1: http.Server;
let h2: http2.Http2Server;
let port1 = 0;
let port2 = 0;

beforeAll(async () => {
  propagation.setGlobalPropagator(new DeadlinePropagator());
  h1 = http.createServer((req, res) => {
    seen.set(req.url ?? '', req.headers);
    res.end('ok');
  });
  h2 = http2.createServer();
  h2.on('stream', (stream, headers) => {
    seen.set(String(headers[':path']), headers);
    stream.respond({ ':status': 200 });
    stream.end('ok');
  });
  h1.listen(0, '127.0.0.1');
  h2.listen(0, '127.0.0.1');
  await Promise.all([once(h1, 'listening'), once(h2, 'listening')]);
  port1 = (h1.address() as AddressInfo).port;
  port2 = (h2.address() as AddressInfo).port;
});
afterAll(() => {
  propagation.disable();
  h1.closeAllConnections();
  h1.close();
  h2.close();
});

const uninstall: (() => void)[] = [];
afterEach(() => {
  for (const undo of uninstall.splice(0)) undo();
});

function install(envoyUpstreamTimeout: boolean): void {
  const options = { envoyUpstreamTimeout, headersTimeoutMs: 0 };
  const dispatcher = installDeadlineDispatcher(options);
  const node = installHttpDeadlines(options);
  const streams = installHttp2Deadlines(options);
  uninstall.push(() => {
    dispatcher.uninstall();
    node.uninstall();
    streams.uninstall();
  });
}

async function viaHttp(path: string, headers: Record<string, string> = {}): Promise<void> {
  const req = http.get({ host: '127.0.0.1', port: port1, path, headers });
  const [res] = (await once(req, 'response')) as [http.IncomingMessage];
  res.resume();
  await once(res, 'end');
}

async function viaHttp2(path: string): Promise<void> {
  const session = http2.connect(`http://127.0.0.1:${String(port2)}`);
  try {
    const stream = session.request({ ':path': path });
    stream.resume();
    await once(stream, 'end');
  } finally {
    session.close();
  }
}

const CLIENTS: [string, (path: string) => Promise<unknown>][] = [
  ['fetch', async (path) => (await fetch(`http://127.0.0.1:${String(port1)}${path}`)).text()],
  [
    'undici.request (headers of its own, one of them Envoy’s)',
    async (path) =>
      (
        await undici.request(`http://127.0.0.1:${String(port1)}${path}`, { headers: { 'X-Envoy-Upstream-Rq-Timeout-Ms': '999999' } })
      ).body.text(),
  ],
  ['node:http', viaHttp],
  ['node:http2', viaHttp2],
];

describe('envoyUpstreamTimeout', () => {
  it.each(CLIENTS)('on: %s sends the budget under both names, the same value', async (name, call) => {
    install(true);
    const path = `/on/${name.split(' ')[0] ?? name}`;
    await withTimeout(5_000, () => call(path));
    const headers = seen.get(path);
    const budget = Number(headers?.[OURS]);
    expect(budget).toBeGreaterThan(3_000);
    expect(budget).toBeLessThanOrEqual(5_000);
    expect(headers?.[ENVOY]).toBe(headers?.[OURS]); // one value, the caller's own replaced
  });

  it.each(CLIENTS)('off (the default): %s sends only x-request-timeout-ms', async (name, call) => {
    install(false);
    const path = `/off/${name.split(' ')[0] ?? name}`;
    await withTimeout(5_000, () => call(path));
    expect(Number(seen.get(path)?.[OURS])).toBeGreaterThan(3_000);
    if (!name.startsWith('undici.request')) expect(seen.get(path)?.[ENVOY]).toBeUndefined();
  });

  it('with no deadline nothing is sent under either name', async () => {
    install(true);
    await viaHttp('/none');
    expect(seen.get('/none')?.[OURS]).toBeUndefined();
    expect(seen.get('/none')?.[ENVOY]).toBeUndefined();
  });

  it('anything but a boolean is refused, naming the option', () => {
    expect(() => installHttpDeadlines({ envoyUpstreamTimeout: 'yes' as never })).toThrow(LifelineError);
    expect(() => installHttpDeadlines({ envoyUpstreamTimeout: 'yes' as never })).toThrow(/envoyUpstreamTimeout/);
  });
});
