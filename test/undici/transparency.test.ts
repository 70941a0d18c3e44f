import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { createProxy } from 'proxy';
import * as undici from 'undici';
import * as undici7 from 'undici7';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  deadlineInterceptor,
  installDeadlineDispatcher,
  isDeadlineExceeded,
  withTimeout,
  type InstalledDeadlineDispatcher,
} from '../../src/index.js';
import { monotonicNow } from '../../src/deadline/clock.js';
import type { CallDeadline } from '../../src/policy/index.js';
import { wrapWithDeadline } from '../../src/undici/deadline-handler.js';
import { runNode } from '../support/node.js';
import { answersOk, serve, type TestServer } from '../support/servers.js';

/**
 * lifeline must be invisible to undici and fetch users: a request that ends before its deadline
 * looks exactly as it would without lifeline. The first cases below broke under a deadline in 0.1;
 * the others (trailers, redirects, retries, upgrades) keep it so.
 */
let installed: InstalledDeadlineDispatcher;
let ok: TestServer;
let echo: TestServer;
beforeAll(async () => {
  installed = installDeadlineDispatcher();
  ok = await serve(answersOk);
  echo = await serve((req, res) => {
    void readAll(req).then((body) => {
      res
        .writeHead(200, { 'content-type': 'text/plain' })
        .end(`${req.headers['content-type'] ?? ''}\n${req.headers['content-length'] ?? 'chunked'}\n${body}`);
    });
  });
});
afterAll(async () => {
  installed.uninstall();
  await Promise.all([ok.close(), echo.close()]);
});

async function readAll(req: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of req) body += String(chunk);
  return body;
}

/** The resource timing entry fetch records for `url`, once it is there. */
function resourceTiming(url: string): Promise<PerformanceEntry> {
  return new Promise((resolve) => {
    const observer = new PerformanceObserver((list) => {
      const entry = list.getEntriesByName(url)[0];
      if (entry === undefined) return;
      observer.disconnect();
      resolve(entry);
    });
    observer.observe({ type: 'resource' });
  });
}

describe('fetch resource timing', () => {
  it.each([
    ['without a deadline', <T>(fn: () => Promise<T>) => fn()],
    ['under a deadline', <T>(fn: () => Promise<T>) => withTimeout(10_000, fn)],
  ])('has every timing entry, in order, %s', async (_case, run) => {
    const url = `${ok.url}/timing-${String(Math.random()).slice(2)}`;
    const entry = resourceTiming(url);
    await run(async () => (await fetch(url)).text());
    const timing = (await entry).toJSON() as Record<
      'startTime' | 'fetchStart' | 'connectStart' | 'connectEnd' | 'requestStart' | 'responseStart' | 'responseEnd',
      number
    >;
    expect(timing.responseStart).toBeGreaterThan(0);
    const order = [
      timing.startTime,
      timing.fetchStart,
      timing.connectStart,
      timing.connectEnd,
      timing.requestStart,
      timing.responseStart,
      timing.responseEnd,
    ];
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });
});

/** A handler of undici's current API that records what it was told. */
function recordingHandler(withBodyHooks: boolean) {
  const seen = { bodySent: [] as string[], requestSent: 0, responseStarted: 0, status: 0, body: '', error: undefined as Error | undefined };
  const { promise: done, resolve } = Promise.withResolvers<typeof seen>();
  const handler: undici.Dispatcher.DispatchHandler = {
    onRequestStart: () => undefined,
    onResponseStarted: () => {
      seen.responseStarted++;
    },
    onResponseStart: (_controller, status) => void (seen.status = status),
    onResponseData: (_controller, chunk) => void (seen.body += String(chunk)),
    onResponseEnd: () => {
      resolve(seen);
    },
    onResponseError: (_controller, error) => {
      seen.error = error;
      resolve(seen);
    },
    ...(withBodyHooks
      ? {
          onBodySent: (chunk: Buffer | string) => void seen.bodySent.push(String(chunk)),
          onRequestSent: () => {
            seen.requestSent++;
          },
        }
      : {}),
  };
  return { done, handler };
}

describe('handler callbacks under a deadline', () => {
  // On an undici 8 client, as undici's own interceptors/body-sent-hooks.js does: Node's bundled
  // undici 7 (the global dispatcher once node:http is imported from ESM) drops these itself.
  it.each([
    [
      'without a deadline',
      (fn: () => void) => {
        fn();
      },
    ],
    [
      'under a deadline',
      (fn: () => void) => {
        withTimeout(10_000, fn);
      },
    ],
  ])('onBodySent, onRequestSent and onResponseStarted reach the handler %s', async (_case, run) => {
    const client = new undici.Client(echo.url).compose(deadlineInterceptor());
    try {
      const { done, handler } = recordingHandler(true);
      run(() => client.dispatch({ path: '/sent', method: 'POST', body: 'hello body' }, handler));
      const seen = await done;
      expect(seen.error).toBeUndefined();
      expect(seen.status).toBe(200);
      expect(seen.bodySent.join('')).toBe('hello body');
      expect(seen.requestSent).toBe(1);
      expect(seen.responseStarted).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('a wrapped handler has exactly the callbacks of the one it wraps, unknown ones passed on', () => {
    class Base {
      onRequestStart(): void {}
      onResponseError(): void {}
    }
    class Future extends Base {
      calls: unknown[] = [];
      onResponseStart(): void {}
      onResponseData(): void {}
      onResponseEnd(): void {}
      onSomethingUndiciAddsLater(value: unknown): string {
        this.calls.push(value);
        return 'passed on';
      }
    }
    const shapes: object[] = [
      { onRequestStart() {}, onResponseStart() {}, onResponseData() {}, onResponseEnd() {}, onResponseError() {} },
      { onRequestStart() {}, onResponseStart() {}, onResponseData() {}, onResponseEnd() {}, onResponseError() {}, onBodySent() {} },
      new Future(),
      Object.assign(new Future(), { onOwnArrow: () => 'own' }),
    ];
    for (const inner of shapes) {
      const wrapped = wrapWithDeadline(inner, farDeadline());
      expect(callbackNames(wrapped)).toEqual(callbackNames(inner));
    }
    const future = new Future();
    const wrapped = wrapWithDeadline(future, farDeadline()) as unknown as Future;
    expect(wrapped.onSomethingUndiciAddsLater(42)).toBe('passed on');
    expect(future.calls).toEqual([42]);
  });
});

describe('what a request that ends before its deadline sees: the same as without lifeline', () => {
  const cases = [
    ['without a deadline', <T>(fn: () => Promise<T>) => fn()],
    ['under a deadline', <T>(fn: () => Promise<T>) => withTimeout(10_000, fn)],
  ] as const;
  let special: TestServer;
  let failedOnce = new Set<string>();
  beforeAll(async () => {
    special = await serve((req, res) => {
      const path = req.url ?? '/';
      if (path.startsWith('/trailers')) {
        res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
        res.write('body ');
        res.addTrailers({ 'x-checksum': 'c0ffee' });
        res.end('end');
      } else if (path.startsWith('/redirect')) {
        res.writeHead(302, { location: '/landed' }).end();
      } else if (path.startsWith('/landed')) {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('landed');
      } else if (path.startsWith('/flaky') && !failedOnce.has(path)) {
        failedOnce.add(path); // the first attempt fails; the retry succeeds
        res.writeHead(503, { 'retry-after': '0' }).end('busy');
      } else {
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`ok ${path}`);
      }
    });
  });
  afterAll(async () => {
    await special.close();
  });

  it.each(cases)('trailers arrive %s', async (_case, run) => {
    const agent = new undici.Agent().compose(deadlineInterceptor());
    try {
      const seen = await run(async () => {
        const response = await undici.request(`${special.url}/trailers`, { dispatcher: agent });
        const body = await response.body.text();
        return { status: response.statusCode, body, trailers: response.trailers };
      });
      expect(seen).toEqual({ status: 200, body: 'body end', trailers: { 'x-checksum': 'c0ffee' } });
    } finally {
      await agent.close();
    }
  });

  it.each(cases)('fetch follows a redirect %s', async (_case, run) => {
    // The global dispatcher is lifeline's here (installed above).
    const seen = await run(async () => {
      const response = await fetch(`${special.url}/redirect`);
      return { status: response.status, redirected: response.redirected, url: response.url, body: await response.text() };
    });
    expect(seen).toEqual({ status: 200, redirected: true, url: `${special.url}/landed`, body: 'landed' });
  });

  // compose(a, b) makes b the outer layer: the deadline around all attempts, or around each one.
  it.each(
    cases.flatMap(([name, run]) => [
      [`${name}, deadline outside`, run, 'outside'] as const,
      [`${name}, retry outside`, run, 'inside'] as const,
    ]),
  )("undici's retry interceptor retries a 503 %s", async (_case, run, deadline) => {
    failedOnce = new Set();
    const path = `/flaky-${String(Math.random()).slice(2)}`;
    const before = special.requests();
    const retry = undici.interceptors.retry({ maxRetries: 2, minTimeout: 1, timeoutFactor: 1, statusCodes: [503] });
    const agent =
      deadline === 'outside'
        ? new undici.Agent().compose(retry, deadlineInterceptor())
        : new undici.Agent().compose(deadlineInterceptor(), retry);
    try {
      const seen = await run(async () => {
        const response = await undici.request(`${special.url}${path}`, { dispatcher: agent });
        return { status: response.statusCode, body: await response.body.text() };
      });
      expect(seen).toEqual({ status: 200, body: `ok ${path}` });
      expect(special.requests() - before).toBe(2);
    } finally {
      await agent.close();
    }
  });

  it.each(cases)('an upgrade hands over the socket %s', async (_case, run) => {
    const server = createServer();
    server.on('upgrade', (req: IncomingMessage, socket) => {
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: ${req.headers.upgrade ?? ''}\r\n\r\n`);
      socket.on('data', (chunk: Buffer) => socket.end(`echo ${String(chunk)}`));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const agent = new undici.Agent().compose(deadlineInterceptor());
    try {
      const { port } = server.address() as AddressInfo;
      const seen = await run(async () => {
        const { headers, socket } = await undici.upgrade(`http://127.0.0.1:${String(port)}/chat`, {
          dispatcher: agent,
          protocol: 'lifeline-test',
        });
        socket.write('ping');
        let echoed = '';
        for await (const chunk of socket) echoed += String(chunk);
        return { upgrade: headers.upgrade, echoed };
      });
      expect(seen).toEqual({ upgrade: 'lifeline-test', echoed: 'echo ping' });
    } finally {
      await agent.close();
      server.closeAllConnections();
      server.close();
    }
  });
});

/** A call's deadline a minute away, of its own (no context deadline). */
function farDeadline(): CallDeadline {
  return { at: Date.now() + 60_000, monotonicAt: monotonicNow() + 60_000, source: 'scope', fromPolicy: false, untilHeaders: false };
}

/** Every `on*` function a handler has, own or inherited, sorted. */
function callbackNames(handler: object): string[] {
  const names = new Set<string>();
  for (let p: object | null = handler; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (/^on[A-Z]/.test(name) && typeof (handler as Record<string, unknown>)[name] === 'function') names.add(name);
    }
  }
  return [...names].sort();
}

describe("handlers undici refuses keep undici's error under a deadline", () => {
  const legacy = { onConnect() {}, onHeaders() {}, onData() {}, onComplete() {}, onError() {} };
  const noErrorCallback = { onRequestStart() {}, onResponseStart() {}, onResponseData() {}, onResponseEnd() {} };
  let client: undici.Dispatcher;
  beforeAll(() => {
    client = new undici.Client(ok.url).compose(deadlineInterceptor());
  });
  afterAll(() => client.close());

  it.each([
    ['a legacy handler (onConnect/onHeaders/onError)', legacy],
    ['a handler without onResponseError', noErrorCallback],
  ])('%s: the dispatch throws UND_ERR_INVALID_ARG, as without lifeline', (_case, handler) => {
    const dispatch = () => client.dispatch({ path: '/', method: 'GET' }, handler as unknown as undici.Dispatcher.DispatchHandler);
    const without = catchCode(dispatch);
    expect(without).toBe('UND_ERR_INVALID_ARG');
    expect(withTimeout(10_000, () => catchCode(dispatch))).toBe(without);
  });

  it('a handler without onResponseEnd is told through onResponseError, not left waiting', () => {
    const errors: Error[] = [];
    const handler = {
      onRequestStart() {},
      onResponseStart() {},
      onResponseData() {},
      onResponseError: (_c: unknown, error: Error) => void errors.push(error),
    };
    withTimeout(10_000, () => client.dispatch({ path: '/', method: 'GET' }, handler as unknown as undici.Dispatcher.DispatchHandler));
    expect(errors.map((e) => (e as Error & { code?: string }).code)).toEqual(['UND_ERR_INVALID_ARG']);
  });

  it('a legacy handler through the global slot older undici copies read is answered, with or without lifeline', async () => {
    const legacySlot = (): undici.Dispatcher =>
      (globalThis as unknown as Record<symbol, undici.Dispatcher>)[Symbol.for('undici.globalDispatcher.1')] as undici.Dispatcher;
    const answer = (): Promise<number> =>
      new Promise((resolve, reject) => {
        legacySlot().dispatch({ origin: ok.url, path: '/legacy', method: 'GET' }, {
          onConnect() {},
          onHeaders: (status: number) => {
            resolve(status);
          },
          onData() {},
          onComplete() {},
          onError: reject,
        } as unknown as undici.Dispatcher.DispatchHandler);
      });
    expect(await answer()).toBe(200);
    expect(await withTimeout(10_000, answer)).toBe(200);
    installed.uninstall();
    try {
      expect(await answer()).toBe(200);
    } finally {
      installed = installDeadlineDispatcher();
    }
  });
});

function catchCode(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
}

describe('FormData from another undici copy (an app whose undici is not deduplicated)', () => {
  it.each([
    [
      'undici 7',
      () => new undici7.FormData() as unknown as FormData,
      (url: string, body: unknown) => undici7.request(url, { method: 'POST', body: body as never }),
    ],
    [
      'undici 8',
      () => new undici.FormData() as unknown as FormData,
      (url: string, body: unknown) => undici.request(url, { method: 'POST', body: body as never }),
    ],
    [
      "Node's own, through fetch",
      () => new FormData(),
      async (url: string, body: unknown) => {
        const res = await fetch(url, { method: 'POST', body: body as FormData });
        return { statusCode: res.status, body: { text: () => res.text() } };
      },
    ],
  ])('%s: the multipart body arrives whole, under a deadline', async (_copy, make, request) => {
    const form = make();
    form.append('field', 'value');
    form.append('file', new Blob(['file contents'], { type: 'text/plain' }), 'notes.txt');
    const { statusCode, body } = await withTimeout(10_000, () => request(`${echo.url}/form`, form));
    const text = await body.text();
    expect(statusCode).toBe(200);
    const [contentType = '', contentLength = ''] = text.split('\n', 2);
    expect(contentType).toMatch(/^multipart\/form-data; boundary=/);
    expect(Number(contentLength)).toBe(Buffer.byteLength(text.slice(contentType.length + contentLength.length + 2)));
    expect(text).toContain('name="field"\r\n\r\nvalue');
    expect(text).toContain('name="file"; filename="notes.txt"\r\nContent-Type: text/plain\r\n\r\nfile contents');
  });
});

describe('the dispatcher the process already has', () => {
  let proxy: Server;
  const proxied = new Set<string>();
  let proxyUrl: string;
  let silent: Server;
  let silentUrl: string;
  beforeAll(async () => {
    proxy = createProxy(createServer());
    // Forwarded (`GET http://host/path`) or tunnelled (`CONNECT host:port`): either way through the proxy.
    const seen = (req: IncomingMessage): void =>
      void proxied.add(new URL(req.url?.startsWith('http') ? req.url : `http://${req.url ?? ''}`).host);
    proxy.on('request', seen);
    proxy.on('connect', seen);
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    proxyUrl = `http://127.0.0.1:${String((proxy.address() as AddressInfo).port)}`;
    silent = createServer(() => undefined);
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    silentUrl = `http://127.0.0.1:${String((silent.address() as AddressInfo).port)}`;
  });
  afterAll(() => {
    proxy.closeAllConnections();
    proxy.close();
    silent.closeAllConnections();
    silent.close();
  });

  /** Sets `agent` as the global dispatcher, installs lifeline on it, runs `check`, puts everything back. */
  async function installedOn(agent: undici.Dispatcher, check: () => Promise<void>): Promise<void> {
    installed.uninstall();
    const previous = undici.getGlobalDispatcher();
    undici.setGlobalDispatcher(agent);
    const own = installDeadlineDispatcher();
    try {
      await check();
    } finally {
      own.uninstall();
      expect(undici.getGlobalDispatcher()).toBe(agent);
      undici.setGlobalDispatcher(previous);
      await agent.close();
      installed = installDeadlineDispatcher();
    }
  }

  it("a user's ProxyAgent set before install keeps proxying, with deadlines on top", async () => {
    await installedOn(new undici.ProxyAgent(proxyUrl), async () => {
      proxied.clear();
      const res = await withTimeout(10_000, () => fetch(`${ok.url}/via-proxy`));
      expect(await res.text()).toBe('ok');
      expect([...proxied]).toEqual([new URL(ok.url).host]);
      const error = await withTimeout(200, () => fetch(`${silentUrl}/stuck`)).catch((e: unknown) => e);
      expect(isDeadlineExceeded(error)).toBe(true);
    });
  });

  it('a configured Agent set before install keeps its settings (a custom DNS lookup here)', async () => {
    const looked: string[] = [];
    const agent = new undici7.Agent({
      connect: {
        lookup: (hostname, _options, callback) => {
          looked.push(hostname);
          callback(null, [{ address: '127.0.0.1', family: 4 }]);
        },
      },
    });
    await installedOn(agent as unknown as undici.Dispatcher, async () => {
      const res = await withTimeout(10_000, () => fetch(`http://lifeline-test.invalid:${String(ok.port)}/custom-lookup`));
      expect(await res.text()).toBe('ok');
      expect(looked).toEqual(['lifeline-test.invalid']);
    });
  });

  it("a composed Agent of the app's undici copy keeps its interceptors", async () => {
    let intercepted = 0;
    const composed = new undici7.Agent().compose((dispatch) => (opts, handler) => {
      intercepted++;
      return dispatch(opts, handler);
    });
    await installedOn(composed as unknown as undici.Dispatcher, async () => {
      const res = await withTimeout(10_000, () => fetch(`${ok.url}/composed`));
      expect(await res.text()).toBe('ok');
      expect(intercepted).toBe(1);
    });
  });

  it('NODE_USE_ENV_PROXY=1 under register mode: fetch still goes through the proxy, and ends at its deadline', async () => {
    const source = [
      "import { withTimeout, isDeadlineExceeded } from 'otel-lifeline';",
      `const res = await withTimeout(10_000, () => fetch(${JSON.stringify(`${ok.url}/env-proxy`)}));`,
      'console.log(res.status, await res.text());',
      `const error = await withTimeout(300, () => fetch(${JSON.stringify(`${silentUrl}/env-proxy-stuck`)})).catch((e) => e);`,
      'console.log(isDeadlineExceeded(error));',
    ].join('\n');
    proxied.clear();
    const result = await runNode(['--import', 'otel-lifeline/register', '--input-type=module', '-e', source], {
      timeoutMs: 20_000,
      env: {
        ...process.env,
        NODE_USE_ENV_PROXY: '1',
        HTTP_PROXY: proxyUrl,
        NO_PROXY: '',
        LIFELINE_PROBE_PORT: '0',
        OTEL_TRACES_EXPORTER: 'none',
        OTEL_METRICS_EXPORTER: 'none',
        OTEL_LOGS_EXPORTER: 'none',
      },
    });
    expect(result.stderr).toBe('');
    expect(result.stdout.trim().split('\n')).toEqual(['200 ok', 'true']);
    expect([...proxied].sort()).toEqual([new URL(ok.url).host, new URL(silentUrl).host].sort());
  });
});
