import { propagation } from '@opentelemetry/api';
import { createHook } from 'node:async_hooks';
import {
  connect,
  constants,
  createServer,
  createSecureServer,
  type ClientHttp2Session,
  type ClientHttp2Stream,
  type Http2SecureServer,
  type Http2Server,
  type OutgoingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installHttp2Deadlines } from '../../src/http2/index.js';
import { DeadlineExceededError, DeadlinePropagator, isDeadlineExceeded, withTimeout, type DeadlinePolicyOptions } from '../../src/index.js';
import { lateness } from '../support/clients.js';
import { selfSignedCertificate, stallsHandshake, type TestServer } from '../support/servers.js';
import { afterThisTurn } from '../support/turns.js';

/**
 * node:http2 client streams under a deadline, against real HTTP/2 servers on loopback (h2c and TLS)
 * that stall in each phase: the stream is reset with CANCEL and fails with the deadline error,
 * and its session serves the next stream.
 */
const DEADLINE_MS = 300;
/** How late a cut may come: a loaded 2-core machine's scheduling, not a hang. */
const LATE_MS = 50;

/** What the servers saw: each stream's path and the rstCode it closed with, and the headers it came with. */
const closed = new Map<string, number>();
const seenHeaders = new Map<string, OutgoingHttpHeaders>();

function handler(stream: ServerHttp2Stream, headers: OutgoingHttpHeaders): void {
  const path = String(headers[':path']);
  seenHeaders.set(path, headers);
  stream.on('close', () => closed.set(path, stream.rstCode));
  stream.on('error', () => undefined);
  const route = path.split('?')[0] ?? '';
  if (route.endsWith('/head')) return; // never answers
  if (route.endsWith('/body')) {
    stream.respond({ ':status': 200 });
    stream.write('first chunk;'); // and stalls
    return;
  }
  if (route.endsWith('/slow')) {
    // head at once, then a body for 3 × the deadline
    stream.respond({ ':status': 200 });
    const timer = setInterval(() => stream.write('.'), 20);
    setTimeout(() => {
      clearInterval(timer);
      if (!stream.destroyed) stream.end('end');
    }, DEADLINE_MS * 3);
    stream.on('close', () => {
      clearInterval(timer);
    });
    return;
  }
  if (route.endsWith('/late')) {
    // the head after 3 × the deadline
    const timer = setTimeout(() => {
      if (!stream.destroyed) stream.respond({ ':status': 200 }, { endStream: true });
    }, DEADLINE_MS * 3);
    stream.on('close', () => {
      clearTimeout(timer);
    });
    return;
  }
  stream.respond({ ':status': 200 });
  // The header tests read what came: the deadline header, or 'none'.
  const echo = route.includes('/header/') || route.endsWith('/ip') || route.endsWith('/echo');
  stream.end(echo ? String(headers['x-request-timeout-ms'] ?? 'none') : 'ok');
}

interface H2Server {
  url: string;
  port: number;
  server: Http2Server | Http2SecureServer;
}

async function listen(server: Http2Server | Http2SecureServer, scheme: string): Promise<H2Server> {
  server.on('stream', handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `${scheme}://127.0.0.1:${String(port)}`, port, server };
}

let h2c: H2Server;
let h2: H2Server;
let ca = '';
/** Accepts TCP and never says a word: no HTTP/2 preface (h2c), no TLS handshake (https). */
let silent: TestServer;
const sessions = new Set<ClientHttp2Session>();

beforeAll(async () => {
  propagation.setGlobalPropagator(new DeadlinePropagator());
  const credentials = selfSignedCertificate();
  ca = credentials.cert;
  h2c = await listen(createServer(), 'http');
  h2 = await listen(createSecureServer(credentials), 'https');
  silent = await stallsHandshake();
});
afterAll(async () => {
  for (const session of sessions) session.destroy();
  await Promise.all(
    [h2c, h2].map(
      ({ server }) =>
        new Promise((resolve) => {
          server.close(resolve);
        }),
    ),
  );
  await silent.close();
  propagation.disable();
});

/** A session to `url`, its errors noted (the tests expect none). */
function session(url: string): ClientHttp2Session & { errors: unknown[] } {
  const opened = Object.assign(connect(url, url.startsWith('https') ? { ca } : {}), { errors: [] as unknown[] });
  opened.on('error', (error) => opened.errors.push(error));
  sessions.add(opened);
  return opened;
}

/** One GET as an app makes it: resolves with the whole body, rejects with the stream's error. */
function get(
  on: ClientHttp2Session,
  path: string,
  headers: OutgoingHttpHeaders | string[] = {},
  started?: (stream: ClientHttp2Stream) => void,
) {
  return new Promise<string>((resolve, reject) => {
    const stream = on.request(Array.isArray(headers) ? [':path', path, ...headers] : { ':path': path, ...headers });
    started?.(stream);
    if (!stream.writableEnded) stream.end(); // a POST: no body
    let body = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => {
      resolve(body);
    });
    stream.on('error', reject);
  });
}

/** Installs with `options` for one test. */
async function installed<T>(options: DeadlinePolicyOptions, run: () => Promise<T>): Promise<T> {
  const deadlines = installHttp2Deadlines(options);
  try {
    return await run();
  } finally {
    deadlines.uninstall();
  }
}

/** The rstCode the server saw `path` close with, once it has. */
async function serverSaw(path: string): Promise<number | undefined> {
  for (let i = 0; i < 100 && !closed.has(path); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return closed.get(path);
}

describe.each([
  ['h2c', () => h2c.url],
  ['TLS', () => h2.url],
])('%s: a stream under a deadline', (_name, url) => {
  it.each([
    ['waiting for the response head', 'head'],
    ['streaming a body that stalls', 'body'],
  ])('%s: cut at the deadline with CANCEL; the session serves the next stream', async (_phase, route) =>
    installed({}, async () => {
      const on = session(url());
      expect(await withTimeout(5_000, () => get(on, '/warm'))).toBe('ok'); // connected: only the stream's phase counts
      const path = `/${_name}/${route}`;
      let stream: ClientHttp2Stream | undefined;
      const { error, lateMs } = await lateness(DEADLINE_MS, () => get(on, path, {}, (s) => (stream = s)));
      expect(error).toBeInstanceOf(DeadlineExceededError);
      expect(isDeadlineExceeded(error)).toBe(true);
      expect((error as DeadlineExceededError).source).toBe('scope');
      expect(lateMs).toBeGreaterThanOrEqual(0);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(stream?.rstCode).toBe(constants.NGHTTP2_CANCEL);
      expect(await serverSaw(path)).toBe(constants.NGHTTP2_CANCEL);
      expect(await withTimeout(5_000, () => get(on, '/after'))).toBe('ok');
      expect(on.errors).toEqual([]);
      on.close();
    }),
  );
});

describe('a session that never connects', () => {
  it('TLS handshake that never completes: the stream is cut, and the session with the last stream waiting on it', () =>
    installed({}, async () => {
      const on = session(`https://127.0.0.1:${String(silent.port)}`);
      // Two streams queued on it: the first cut leaves the session to the second.
      const second = withTimeout(DEADLINE_MS * 2, () => get(on, '/second')).catch((e: unknown) => e);
      const { error, lateMs } = await lateness(DEADLINE_MS, () => get(on, '/first'));
      expect(error).toBeInstanceOf(DeadlineExceededError);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(on.connecting).toBe(true);
      expect(on.destroyed).toBe(false);
      expect(await second).toBeInstanceOf(DeadlineExceededError);
      expect(on.destroyed).toBe(true);
      expect(on.errors).toEqual([]);
    }));

  it('h2c server that never sends its preface: the stream is cut; the session, connected as Node counts it, stays', () =>
    installed({}, async () => {
      const on = session(`http://127.0.0.1:${String(silent.port)}`);
      const { error, lateMs } = await lateness(DEADLINE_MS, () => get(on, '/no-preface'));
      expect(error).toBeInstanceOf(DeadlineExceededError);
      expect(lateMs).toBeLessThan(LATE_MS);
      expect(on.destroyed).toBe(false);
      expect(on.pendingSettingsAck).toBe(true); // the server never acknowledged a thing
      on.destroy();
    }));
});

describe('deadlines from the policy', () => {
  it('a matching rule bounds a stream the context does not; others are not bounded', async () => {
    const on = session(h2c.url);
    await installed(
      {
        policy: [
          {
            match: { 'url.path': '/ruled/head', 'http.request.method': 'GET', 'server.port': h2c.port, 'url.scheme': 'http' },
            timeoutMs: DEADLINE_MS,
          },
        ],
      },
      async () => {
        const started = performance.now();
        const error = await get(on, '/ruled/head?x=1').catch((e: unknown) => e);
        const tookMs = performance.now() - started;
        expect((error as DeadlineExceededError).source).toBe('policy');
        expect(tookMs).toBeGreaterThanOrEqual(DEADLINE_MS - 1);
        expect(tookMs).toBeLessThan(DEADLINE_MS + LATE_MS);
        // Not matched (the method), so not bounded: it outlives the rule's budget.
        expect(await get(on, '/ruled/late', { ':method': 'POST' })).toBe('');
        expect(await withTimeout(5_000, () => get(on, '/after'))).toBe('ok');
      },
    );
    on.close();
  });

  it('defaultTimeoutMs bounds a stream nothing else bounds', async () => {
    const on = session(h2.url);
    await installed({ defaultTimeoutMs: DEADLINE_MS }, async () => {
      const started = performance.now();
      const error = await get(on, '/default/head').catch((e: unknown) => e);
      expect(isDeadlineExceeded(error)).toBe(true);
      expect((error as DeadlineExceededError).source).toBe('policy');
      expect(performance.now() - started).toBeLessThan(DEADLINE_MS + LATE_MS);
    });
    on.close();
  });

  it('headersTimeoutMs bounds the wait for the head, not the body, and steps aside for the stream’s own timeout', async () => {
    const on = session(h2c.url);
    await installed({ headersTimeoutMs: DEADLINE_MS }, async () => {
      const started = performance.now();
      const error = await get(on, '/bound/head').catch((e: unknown) => e);
      expect((error as DeadlineExceededError).source).toBe('headers');
      expect(performance.now() - started).toBeLessThan(DEADLINE_MS + LATE_MS);
      // Head at once, body for 3 × the bound: not cut.
      expect(await get(on, '/bound/slow')).toMatch(/end$/);
      // A stream with a timeout of its own is the caller's to bound.
      expect(
        await get(on, '/bound/late', {}, (s) => {
          s.setTimeout(60_000);
        }),
      ).toBe('');
      // No header for the bound: it is no deadline of the server's work.
      expect(await get(on, '/bound/echo')).toBe('none');
    });
    on.close();
  });
});

describe('the deadline header', () => {
  it('goes to internal hosts with the deadline the stream got, in both forms of headers; not to others, not without a deadline', async () => {
    // Connected before the install (lifeline reaches the session class through a stream of it): its
    // first stream goes without the header, those after carry it.
    const on = session(h2c.url);
    await installed({}, async () => {
      await withTimeout(5_000, () => get(on, '/header/first'));
      const ip = Number(await withTimeout(5_000, () => get(on, '/header/ip')));
      expect(ip).toBeGreaterThan(4_000);
      expect(ip).toBeLessThanOrEqual(5_000);
      const raw = Number(await withTimeout(5_000, () => get(on, '/header/raw', ['x-other', '1'])));
      expect(raw).toBeGreaterThan(4_000);
      const localhost = await withTimeout(5_000, () => get(on, '/header/localhost', { ':authority': `localhost:${String(h2c.port)}` }));
      expect(Number(localhost)).toBeGreaterThan(4_000);
      const external = await withTimeout(5_000, () =>
        get(on, '/header/public', { ':authority': `service.example.com:${String(h2c.port)}` }),
      );
      expect(external).toBe('none');
      expect(await get(on, '/header/unbounded')).toBe('none');
    });
    await installed({ policy: [{ match: { 'url.path': '/header/ruled' }, timeoutMs: 10_000 }] }, async () => {
      // Connected after the install: its very first stream carries the header.
      const fresh = session(h2c.url);
      const ruled = Number(await get(fresh, '/header/ruled'));
      expect(ruled).toBeGreaterThan(9_000);
      expect(ruled).toBeLessThanOrEqual(10_000);
      fresh.close();
    });
    await installed({ deadlineHeaderHosts: 'none' }, async () => {
      expect(await withTimeout(5_000, () => get(on, '/header/none'))).toBe('none');
    });
    on.close();
  });

  it('leaves gRPC streams to grpc-js: no header, no bound', async () => {
    const on = session(h2c.url);
    await installed({}, async () => {
      const body = await withTimeout(DEADLINE_MS, () => get(on, '/grpc/late', { 'content-type': 'application/grpc' }));
      expect(body).toBe('');
      expect(seenHeaders.get('/grpc/late')?.['x-request-timeout-ms']).toBeUndefined();
    });
    on.close();
  });
});

describe('streams that end first, and uninstall', () => {
  it('no timer left behind by 50 streams that end before their deadline', async () => {
    const on = session(h2c.url);
    await installed({}, async () => {
      await withTimeout(5_000, () => get(on, '/warm'));
      const live = new Set<number>();
      let created = 0;
      const hook = createHook({
        init(id, type, _trigger, resource) {
          const idle = (resource as { _idleTimeout?: number })._idleTimeout ?? 0;
          if (type !== 'Timeout' || idle <= 59_000 || idle > 60_000) return;
          created++;
          live.add(id);
        },
        destroy(id) {
          live.delete(id);
        },
      }).enable();
      try {
        for (let i = 0; i < 50; i++) expect(await withTimeout(60_000, () => get(on, `/ends/${String(i)}`))).not.toBe('');
        await afterThisTurn();
      } finally {
        hook.disable();
      }
      expect(created).toBe(50);
      expect(live.size).toBe(0);
    });
    on.close();
  });

  it('after uninstall, streams are neither bounded nor told the deadline', async () => {
    const on = session(h2c.url);
    const deadlines = installHttp2Deadlines({ defaultTimeoutMs: 100 });
    expect(isDeadlineExceeded(await get(on, '/installed/late').catch((e: unknown) => e))).toBe(true);
    expect(Number(await withTimeout(5_000, () => get(on, '/installed/ip')))).toBeGreaterThan(4_000);
    deadlines.uninstall();
    deadlines.uninstall(); // idempotent
    expect(await get(on, '/uninstalled/late')).toBe('');
    expect(await withTimeout(5_000, () => get(on, '/uninstalled/ip'))).toBe('none');
    on.close();
  });
});
