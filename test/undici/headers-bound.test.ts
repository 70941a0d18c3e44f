import { propagation } from '@opentelemetry/api';
import { Readable, Writable } from 'node:stream';
import * as undici from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DeadlineExceededError,
  DeadlinePropagator,
  installDeadlineDispatcher,
  isDeadlineExceeded,
  withTimeout,
  type InstalledDeadlineDispatcher,
} from '../../src/index.js';
import { expectDeadlineHeaderToInternalHosts, recordingServer } from '../support/deadline-header.js';
import {
  answersAfter,
  loopbackLookup,
  neverAnswers,
  readsBody,
  serve,
  stallsHandshake,
  streamsFor,
  type TestServer,
} from '../support/servers.js';

/**
 * The headers bound and the deadline header on undici's path (Node's fetch, undici's fetch,
 * request and stream), through the global dispatcher, against real loopback servers. Every name
 * resolves to 127.0.0.1 (the dispatcher's `lookup`), so `service.example.com` is a real call to a
 * host that is not internal.
 */
const BOUND_MS = 300;
const SLOW_MS = BOUND_MS * 3;

type Call = (url: string) => Promise<string>;
const CLIENTS: Record<string, Call> = {
  'global fetch': async (url) => (await fetch(url)).text(),
  'undici.fetch': async (url) => (await undici.fetch(url)).text(),
  'undici.request': async (url) => (await undici.request(url)).body.text(),
  'undici.stream': async (url) => {
    let body = '';
    await undici.stream(
      url,
      { method: 'GET' },
      () =>
        new Writable({
          write: (chunk: Buffer, _encoding, done) => {
            body += chunk.toString();
            done();
          },
        }),
    );
    return body;
  },
};

let installed: InstalledDeadlineDispatcher;
const servers: Record<string, TestServer> = {};
let recording: Awaited<ReturnType<typeof recordingServer>>;
beforeAll(async () => {
  propagation.setGlobalPropagator(new DeadlinePropagator());
  installed = installDeadlineDispatcher({
    dispatcher: new undici.Agent({ connect: { lookup: loopbackLookup as never } }),
    headersTimeoutMs: BOUND_MS,
    policy: [{ match: { 'url.path': /^\/ruled(\/|$)/ }, timeoutMs: 10_000 }],
  });
  servers.silent = await serve(neverAnswers);
  servers.slow = await serve(answersAfter(SLOW_MS));
  servers.stream = await serve(streamsFor(SLOW_MS));
  servers.recording = recording = await recordingServer();
  servers.upload = await serve(readsBody(true));
  servers.uploadStuck = await serve(stuckUpload);
  servers.handshake = await stallsHandshake();
});

/** Reads the body, then never answers: `stuckUpload.state.bodyEndedAt` says when the body was in. */
const stuckUpload = readsBody(false);
afterAll(async () => {
  installed.uninstall();
  propagation.disable();
  await Promise.all(Object.values(servers).map((s) => s.close()));
});

const url = (server: string, path: string, host = '127.0.0.1') => `http://${host}:${String(servers[server]?.port)}${path}`;

/** The DeadlineExceededError in `error`'s cause chain. */
function deadlineError(error: unknown): DeadlineExceededError | undefined {
  for (let e = error; e instanceof Error; e = e.cause) if (e instanceof DeadlineExceededError) return e;
  return undefined;
}

describe.each(Object.entries(CLIENTS))('%s, nothing else bounding the call', (client, call) => {
  const name = client.replace(/\W/g, '-'); // a path segment
  it('a server that never sends its head: cut at the headers bound, as a deadline', async () => {
    const started = Date.now();
    const error = await call(url('silent', `/${name}`)).then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = Date.now() - started;
    expect(isDeadlineExceeded(error), String(error)).toBe(true);
    expect(deadlineError(error)?.source).toBe('headers');
    expect(elapsed).toBeGreaterThanOrEqual(BOUND_MS);
    expect(elapsed).toBeLessThan(BOUND_MS + 2_000); // only proves the bound, not its precision
  });

  it('a head at once, then a body streamed past the bound: not cut', async () => {
    const body = await call(url('stream', `/${name}`));
    expect(body.endsWith('end')).toBe(true);
  });

  it('a context deadline, however long, replaces the bound', async () => {
    expect(await withTimeout(10_000, () => call(url('slow', `/${name}`)))).toBe('ok');
  });

  it('a matching policy rule replaces the bound', async () => {
    expect(await call(url('slow', `/ruled/${name}`))).toBe('ok');
  });

  it('sends x-request-timeout-ms to internal hosts only, and never for the headers bound', async () => {
    await expectDeadlineHeaderToInternalHosts(recording, name, call);
  });
});

describe('undici.request options', () => {
  it("the caller's own headersTimeout replaces the bound", async () => {
    const { body } = await undici.request(url('slow', '/own'), { headersTimeout: 10_000 });
    expect(await body.text()).toBe('ok');
  });

  const shapes: [string, () => unknown][] = [
    ['an object', () => ({ 'x-mine': 'a', 'X-Request-Timeout-Ms': '999999' })],
    ['a flat array', () => ['x-mine', 'a', 'x-request-timeout-ms', '999999']],
    [
      'a Map',
      () =>
        new Map([
          ['x-mine', 'a'],
          ['x-request-timeout-ms', '999999'],
        ]),
    ],
    ['a Headers', () => new undici.Headers({ 'x-mine': 'a', 'x-request-timeout-ms': '999999' })],
    [
      'a generator of pairs',
      () =>
        (function* () {
          yield ['x-mine', 'a'];
          yield ['x-request-timeout-ms', '999999'];
        })(),
    ],
  ];
  it.each(shapes)(
    "headers as %s: the caller's headers arrive, one deadline header replaces theirs, their object is unchanged",
    async (shape, make) => {
      const headers = make();
      const before = headers instanceof Map ? [...headers] : JSON.stringify(headers);
      const path = `/shape/${shape.replace(/ /g, '-')}`;
      const { body } = await withTimeout(5_000, () => undici.request(url('recording', path), { headers: headers as never }));
      expect(await body.text()).toBe('ok');
      const got = recording.seen.get(path);
      expect(got?.['x-mine']).toBe('a');
      expect(got?.['x-request-timeout-ms']).toMatch(/^\d+$/);
      expect(Number(got?.['x-request-timeout-ms'])).toBeLessThanOrEqual(5_000);
      expect(headers instanceof Map ? [...headers] : JSON.stringify(headers)).toEqual(before);
    },
  );

  it("headers undici refuses still fail with undici's own error", async () => {
    const error = await withTimeout(5_000, () => undici.request(url('recording', '/odd'), { headers: ['x-mine'] as never })).catch(
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code).toBe('UND_ERR_INVALID_ARG');
    expect(recording.seen.has('/odd')).toBe(false);
  });
});

describe('what the headers bound counts', () => {
  // An upload of ~3 bounds: 9 chunks, one every third of the bound.
  const CHUNKS = 9;
  const EVERY_MS = BOUND_MS / 3;
  /** A ReadableStream body given slowly; `state.endedAt`: when its last chunk was taken. */
  const slowStream = () => {
    const state = { endedAt: 0 };
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        await new Promise((resolve) => setTimeout(resolve, EVERY_MS));
        if (sent++ < CHUNKS) controller.enqueue(new Uint8Array(1024));
        else {
          state.endedAt = Date.now();
          controller.close();
        }
      },
    });
    return { stream, state };
  };
  const upload = (target: string, body: ReadableStream<Uint8Array>) => fetch(target, { method: 'PUT', body, duplex: 'half' });

  it('fetch with a streamed body slower than the bound: not cut, sending the body is not counted', async () => {
    const res = await upload(url('upload', '/fetch-put'), slowStream().stream);
    expect(await res.text()).toBe(`ok ${String(CHUNKS * 1024)}`);
  });

  it('undici.request with a slow stream body: not cut', async () => {
    async function* body() {
      for (let i = 0; i < CHUNKS; i++) {
        await new Promise((resolve) => setTimeout(resolve, EVERY_MS));
        yield Buffer.alloc(1024);
      }
    }
    const { body: res } = await undici.request(url('upload', '/request-put'), { method: 'PUT', body: Readable.from(body()) });
    expect(await res.text()).toBe(`ok ${String(CHUNKS * 1024)}`);
  });

  it('once the streamed body is sent, a server that never answers is cut at the bound after it, as a deadline', async () => {
    const started = Date.now();
    const { stream, state } = slowStream();
    const error = await upload(url('uploadStuck', '/fetch-put'), stream).then(
      () => undefined,
      (e: unknown) => e,
    );
    const failedAt = Date.now();
    expect(isDeadlineExceeded(error), String(error)).toBe(true);
    expect(deadlineError(error)?.source).toBe('headers');
    expect(state.endedAt - started).toBeGreaterThan(BOUND_MS); // the upload itself outlasted the bound
    expect(failedAt - state.endedAt).toBeGreaterThanOrEqual(BOUND_MS - 2); // timers may fire a ms early
    expect(failedAt - stuckUpload.state.bodyEndedAt).toBeLessThan(BOUND_MS + 3_000);
  });

  it('a Buffer body to a server that never answers: cut at the bound', async () => {
    const error = await undici.request(url('silent', '/buffer-put'), { method: 'PUT', body: Buffer.alloc(1024) }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(deadlineError(error)?.source).toBe('headers');
  });

  it('a connection that never completes (a TLS handshake the server never answers) is cut at the bound', async () => {
    const started = Date.now();
    const error = await fetch(`https://127.0.0.1:${String(servers.handshake?.port)}/`, { method: 'POST', body: 'x' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(deadlineError(error)?.source, String(error)).toBe('headers');
    expect(Date.now() - started).toBeLessThan(BOUND_MS + 3_000);
  });
});
