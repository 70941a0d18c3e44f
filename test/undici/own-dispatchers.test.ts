import { SpanStatusCode } from '@opentelemetry/api';
import { createHook } from 'node:async_hooks';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createProxy } from 'proxy';
import * as undici8 from 'undici';
import type * as Undici7 from 'undici7';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DeadlineSpanProcessor, installDeadlineDispatcher, isDeadlineExceeded, withTimeout } from '../../src/index.js';
import { installDispatcherDeadlines, type InstalledDispatcherDeadlines } from '../../src/undici/index.js';
import { cut, deadlineErrorOf } from '../support/cut.js';
import { instrumentedUndici } from '../support/instrumented.js';
import { answersOk, neverAnswers, serve, stallsBody, stallsHandshake, type TestServer } from '../support/servers.js';
import { afterThisTurn } from '../support/turns.js';

/**
 * The app's own undici dispatchers (not the global one): lifeline puts the deadline on them in
 * every undici copy, here undici 8 (`undici`, loaded by this file's import before the install) and
 * undici 7 (`undici7`, an npm alias, imported after it).
 */

/** How late past its deadline a cut call may end: the deadline timer's own slack on a loaded machine. */
const LATE_MS = 50;
const POLICY = {
  policy: [{ match: { 'url.path': /^\/ruled/ }, timeoutMs: 150 }],
  defaultTimeoutMs: 400,
};

const requireHere = createRequire(import.meta.url);
const tracing = instrumentedUndici([new DeadlineSpanProcessor()]);
/** undici 7 typed as 8: the calls these tests make have the same shape in both. */
type Copy = typeof undici8;
const copies: Record<string, () => Copy> = {};
let undici7: typeof Undici7;
let undici7LoadedBeforeInstall = false;
let installed: InstalledDispatcherDeadlines;
let earlyPool: undici8.Pool;
let ok: TestServer;
let silent: TestServer;
let stall: TestServer;
let handshake: TestServer;
let proxy: Server;
let proxyUrl: string;
const open: { close(): Promise<unknown>; destroy(): Promise<unknown> }[] = [];

beforeAll(async () => {
  tracing.start();
  ok = await serve(answersOk);
  silent = await serve(neverAnswers);
  stall = await serve(stallsBody);
  handshake = await stallsHandshake();
  proxy = createProxy(createServer());
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  proxyUrl = `http://127.0.0.1:${String((proxy.address() as AddressInfo).port)}`;
  // A Pool the app made before lifeline started.
  earlyPool = new undici8.Pool(silent.url);
  undici7LoadedBeforeInstall = Object.keys(requireHere.cache).some((file) => file.includes('/node_modules/undici7/'));
  installed = installDispatcherDeadlines({ ...POLICY, packages: ['undici', 'undici7'] });
  // Loaded after the install, from an ES module (a CommonJS package: its files still come through `require`).
  undici7 = await import('undici7');
  copies['undici 8'] = () => undici8;
  copies['undici 7'] = () => undici7 as unknown as Copy;
});
afterAll(async () => {
  tracing.stop();
  installed.uninstall();
  await Promise.all(open.splice(0).map((d) => d.destroy()));
  await earlyPool.destroy();
  proxy.closeAllConnections();
  proxy.close();
  await Promise.all([ok, silent, stall, handshake].map((s) => s.close()));
});
beforeEach(() => {
  tracing.exporter.reset();
});

/** A dispatcher the test destroys at the end. */
function own<D extends { close(): Promise<unknown>; destroy(): Promise<unknown> }>(dispatcher: D): D {
  open.push(dispatcher);
  return dispatcher;
}

type Kind = (u: Copy, origin: string) => undici8.Dispatcher;
const KINDS: Record<string, Kind> = {
  Pool: (u, origin) => own(new u.Pool(origin)),
  Client: (u, origin) => own(new u.Client(origin)),
  Agent: (u) => own(new u.Agent()),
  BalancedPool: (u, origin) => own(new u.BalancedPool(origin)),
  ProxyAgent: (u) => own(new u.ProxyAgent(proxyUrl)),
  RetryAgent: (u) => own(new u.RetryAgent(new u.Agent())),
};

/** `dispatcher.request` for `url`, reading the whole body as a caller would. */
async function requestText(dispatcher: undici8.Dispatcher, url: string, headers?: IncomingHttpHeaders): Promise<string> {
  const { origin, pathname } = new URL(url);
  const res = await dispatcher.request({ origin, path: pathname, method: 'GET', ...(headers === undefined ? {} : { headers }) });
  return res.body.text();
}

/** The call must be cut by its deadline, with a deadline error, and no later than {@link LATE_MS}. */
async function expectCut(ms: number, call: () => Promise<unknown>): Promise<number> {
  const { error, at, afterDeadlineMs } = await cut((fn) => withTimeout(ms, fn), call);
  expect(isDeadlineExceeded(error)).toBe(true);
  expect(deadlineErrorOf(error)?.deadline).toBe(at);
  expect(afterDeadlineMs).toBeGreaterThanOrEqual(0);
  expect(afterDeadlineMs).toBeLessThan(LATE_MS);
  return afterDeadlineMs;
}

describe.each(['undici 8', 'undici 7'])("%s: the app's own dispatchers under a deadline", (copyName) => {
  const u = (): Copy => (copies[copyName] ?? (() => undici8))();

  describe.each(Object.entries(KINDS))('%s', (_kind, make) => {
    it('aborts a call waiting for headers at its deadline', async () => {
      await expectCut(150, () => requestText(make(u(), silent.url), `${silent.url}/silent`));
    });

    it('aborts a call whose body stalls at its deadline', async () => {
      await expectCut(150, () => requestText(make(u(), stall.url), `${stall.url}/stall`));
    });

    it('leaves a call that finishes first alone', async () => {
      await expect(withTimeout(5_000, () => requestText(make(u(), ok.url), `${ok.url}/fast`))).resolves.toBe('ok');
    });
  });

  it('aborts a call queued behind an exhausted pool, which never reaches the server', async () => {
    const pool = own(new (u().Pool)(silent.url, { connections: 1 }));
    const seen = silent.requests();
    const blocker = withTimeout(3_000, () => pool.request({ path: '/blocker', method: 'GET' })).catch((e: unknown) => e);
    await expectCut(150, () => pool.request({ path: '/queued', method: 'GET' }));
    expect(silent.requests()).toBe(seen + 1); // the blocker only
    expect(isDeadlineExceeded(await blocker)).toBe(true);
  });

  it('aborts a call whose connection never completes (a TLS handshake that never ends)', async () => {
    const pool = own(new (u().Pool)(handshake.url));
    await expectCut(150, () => pool.request({ path: '/connecting', method: 'GET' }));
  });

  it('pool.stream', async () => {
    const pool = own(new (u().Pool)(stall.url));
    const sink = () =>
      new Writable({
        write: (_chunk, _encoding, done) => {
          done();
        },
      });
    await expectCut(150, () => pool.stream({ path: '/stream', method: 'GET' }, sink));
  });

  it('undici.request(url, { dispatcher: pool })', async () => {
    const pool = own(new (u().Pool)(silent.url));
    await expectCut(150, () => u().request(`${silent.url}/top-level`, { dispatcher: pool }));
  });

  it('a proxy in the style of @fastify/reply-from (pool.request({ path, method, headers })) answers 504 at the deadline', async () => {
    const pool = own(new (u().Pool)(silent.url));
    const front = await serve((req, res) => {
      const started = performance.now();
      withTimeout(150, () => pool.request({ path: req.url ?? '/', method: 'GET', headers: req.headers })).then(
        (upstream) => {
          res.writeHead(upstream.statusCode);
          upstream.body.pipe(res);
        },
        (error: unknown) => {
          res.writeHead(isDeadlineExceeded(error) ? 504 : 502, { 'x-after-ms': String(performance.now() - started) }).end();
        },
      );
    });
    try {
      const res = await undici8.request(`${front.url}/proxied`, { dispatcher: own(new undici8.Agent()) });
      await res.body.text();
      expect(res.statusCode).toBe(504);
      expect(Number(res.headers['x-after-ms'])).toBeGreaterThanOrEqual(150 - 1);
      expect(Number(res.headers['x-after-ms'])).toBeLessThan(150 + LATE_MS);
    } finally {
      await front.close();
    }
  });

  it('a policy rule bounds a call with no deadline of its own', async () => {
    const pool = own(new (u().Pool)(silent.url));
    const started = performance.now();
    const error = await pool.request({ path: '/ruled/x', method: 'GET' }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(isDeadlineExceeded(error)).toBe(true);
    expect(deadlineErrorOf(error)?.source).toBe('policy');
    expect(elapsed).toBeGreaterThanOrEqual(150 - 1);
    expect(elapsed).toBeLessThan(150 + LATE_MS);
  });

  it('defaultTimeoutMs bounds a call nothing else bounds', async () => {
    const pool = own(new (u().Pool)(silent.url));
    const started = performance.now();
    const error = await pool.request({ path: '/unbounded', method: 'GET' }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(isDeadlineExceeded(error)).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(POLICY.defaultTimeoutMs - 1);
    expect(elapsed).toBeLessThan(POLICY.defaultTimeoutMs + LATE_MS);
  });

  it("the client span of a cut call is marked (the undici instrumentation sees the pool's requests)", async () => {
    const pool = own(new (u().Pool)(silent.url));
    await expectCut(150, () => pool.request({ path: '/span', method: 'GET' }));
    let span;
    for (let turn = 0; turn < 50 && span === undefined; turn++) {
      span = tracing.exporter.getFinishedSpans().find((s) => s.attributes['url.path'] === '/span');
      await afterThisTurn();
    }
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
    expect(span?.attributes['lifeline.deadline.source']).toBe('scope');
  });
});

describe('loaded before and after the install', () => {
  it('undici 7 was not loaded before the install (so its patch came through the module hook)', () => {
    expect(undici7LoadedBeforeInstall).toBe(false);
  });

  it('a Pool constructed before the install is bounded too', async () => {
    await expectCut(150, () => earlyPool.request({ path: '/early', method: 'GET' }));
  });
});

/**
 * Counts the deadline timers armed for a `ms` deadline while `run` runs, and those still live after it:
 * one timer per request means one deadline handler, whatever the dispatchers it went through.
 */
async function deadlineTimers(ms: number, run: () => Promise<void>): Promise<{ created: number; live: number }> {
  const live = new Set<number>();
  let created = 0;
  const near = (resource: unknown) => {
    const idle = (resource as { _idleTimeout?: number })._idleTimeout ?? 0;
    return idle > ms - 1_000 && idle <= ms;
  };
  const hook = createHook({
    init(id, type, _trigger, resource) {
      if (type === 'Timeout' && near(resource)) {
        created++;
        live.add(id);
      }
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  try {
    await run();
    await afterThisTurn();
  } finally {
    hook.disable();
  }
  return { created, live: live.size };
}

describe('one deadline per request', () => {
  it.each(['undici 8', 'undici 7'])(
    '%s: an Agent (to its Pool, to its Client) arms one timer per request, and none is left behind',
    async (copyName) => {
      const agent = KINDS.Agent?.((copies[copyName] ?? (() => undici8))(), ok.url);
      if (agent === undefined) throw new Error('no Agent');
      const timers = await deadlineTimers(60_000, async () => {
        for (let i = 0; i < 50; i++) expect(await withTimeout(60_000, () => requestText(agent, `${ok.url}/n${String(i)}`))).toBe('ok');
      });
      expect(timers).toEqual({ created: 50, live: 0 });
    },
  );

  it('the global fetch path gets exactly one deadline handler: one timer, one header, one abort', async () => {
    const headers: IncomingHttpHeaders[] = [];
    const recording = await serve((req, res) => {
      headers.push(req.headers);
      answersOk(req, res);
    });
    const global = installDeadlineDispatcher(POLICY);
    try {
      const timers = await deadlineTimers(60_000, async () => {
        for (let i = 0; i < 10; i++)
          expect(await withTimeout(60_000, async () => (await fetch(`${recording.url}/g${String(i)}`)).text())).toBe('ok');
        for (let i = 0; i < 10; i++)
          expect(await withTimeout(60_000, async () => (await undici8.request(`${recording.url}/u${String(i)}`)).body.text())).toBe('ok');
      });
      expect(timers).toEqual({ created: 20, live: 0 });
      expect(headers).toHaveLength(20);
      for (const seen of headers) expect(seen['x-request-timeout-ms']).toMatch(/^\d+$/); // one value, not two joined
      tracing.exporter.reset();
      await expectCut(150, () => fetch(`${silent.url}/global-stuck`));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const spans = tracing.exporter.getFinishedSpans().filter((s) => s.attributes['url.path'] === '/global-stuck');
      expect(spans).toHaveLength(1);
      expect(spans[0]?.attributes['lifeline.deadline.exceeded']).toBe(true);
    } finally {
      global.uninstall();
      await recording.close();
    }
  });
});

describe('uninstall', () => {
  it.each(['undici 8', 'undici 7'])('%s: puts dispatch back; calls are no longer bounded', async (copyName) => {
    const u = (copies[copyName] ?? (() => undici8))();
    const base = requireHere(`${copyName === 'undici 8' ? 'undici' : 'undici7'}/lib/dispatcher/dispatcher-base.js`) as {
      prototype: { dispatch: unknown };
    };
    const patchedDispatch = base.prototype.dispatch;
    installed.uninstall();
    try {
      expect(base.prototype.dispatch).not.toBe(patchedDispatch);
      const pool = own(new u.Pool(silent.url));
      const outcome = await Promise.race([
        withTimeout(100, () => pool.request({ path: '/unpatched', method: 'GET' })).then(
          () => 'answered',
          (e: unknown) => (isDeadlineExceeded(e) ? 'cut' : 'failed'),
        ),
        new Promise((resolve) => setTimeout(resolve, 600, 'still pending')),
      ]);
      expect(outcome).toBe('still pending');
    } finally {
      installed = installDispatcherDeadlines({ ...POLICY, packages: ['undici', 'undici7'] });
    }
    expect(base.prototype.dispatch).not.toBe(patchedDispatch); // a new install, a new wrapper
    await expectCut(150, () => own(new u.Pool(silent.url)).request({ path: '/repatched', method: 'GET' }));
  });
});
