import { once } from 'node:events';
import { SpanStatusCode } from '@opentelemetry/api';
import * as undici from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DeadlineSpanProcessor,
  installDeadlineDispatcher,
  installHttpDeadlines,
  isDeadlineExceeded,
  withDeadline,
  type InstalledDeadlineDispatcher,
  type Installed,
} from '../../src/index.js';
import { CLIENTS as ALL_CLIENTS } from '../support/clients.js';
import { cut, deadlineErrorOf } from '../support/cut.js';
import { instrumentedUndici } from '../support/instrumented.js';
import { ROOT } from '../support/node.js';
import { createTestHost, type TestHost } from '../support/netns.js';

const PORT = 8080;
const tracing = instrumentedUndici([new DeadlineSpanProcessor()]);
const { exporter } = tracing;
let host: TestHost;
let installed: InstalledDeadlineDispatcher;
let httpDeadlines: Installed;
let server: ReturnType<TestHost['spawn']>;

beforeAll(async () => {
  tracing.start();
  installed = installDeadlineDispatcher();
  httpDeadlines = installHttpDeadlines();
  host = createTestHost();
  server = host.spawn(process.execPath, [`${ROOT}/test/fixtures/hello-server.mjs`], { HOST: '0.0.0.0', PORT: String(PORT) });
  await once(server.stdout as NodeJS.ReadableStream, 'data');
});
afterAll(() => {
  tracing.stop();
  installed.uninstall();
  httpDeadlines.uninstall();
  server.kill('SIGKILL');
  host.destroy();
});

/** Runs `call` under a deadline `ms` from now (epoch ms, as `withDeadline` takes it). */
const underDeadlineIn = (ms: number) => (fn: () => Promise<unknown>) => withDeadline(Date.now() + ms, fn);

const CLIENTS: Record<string, (url: string) => Promise<unknown>> = {
  'global fetch': async (url) => (await fetch(url)).text(),
  'undici.fetch': async (url) => (await undici.fetch(url)).text(),
  'undici.request': async (url) => (await undici.request(url)).body.text(),
};

describe('a blackholed connect (iptables DROP in a test namespace) ends at the deadline', () => {
  it('the host answers before the blackhole', async () => {
    expect(await CLIENTS['undici.request']?.(`http://${host.ip}:${PORT}/`)).toBe('hello');
  });

  it.each(Object.keys(CLIENTS))('%s: connect phase aborted at the deadline; the client span ends then, as a timeout', async (client) => {
    const call = CLIENTS[client];
    if (call === undefined) throw new Error(client);
    // A fresh dispatcher: no pooled connection may exist, so the request waits in the connect phase.
    installed.uninstall();
    installed = installDeadlineDispatcher();
    host.blackhole(PORT);
    exporter.reset();
    try {
      // Dropped SYNs would hold the call until undici's 10 s connect timeout, with an error of its own.
      const { error, at, afterDeadlineMs } = await cut(underDeadlineIn(300), () =>
        call(`http://${host.ip}:${PORT}/${client.replace(/\W/g, '')}`),
      );
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(deadlineErrorOf(error)?.deadline).toBe(at);
      expect(afterDeadlineMs).toBeGreaterThanOrEqual(0);
      // Read as the caller gets its error: the span ended with the call, not at the connect timeout.
      const [span] = exporter.getFinishedSpans();
      expect(span?.status.code).toBe(SpanStatusCode.ERROR);
      expect(span?.attributes['error.type']).toBe('timeout');
      expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
    } finally {
      host.lift(PORT);
    }
  });

  it.each(Object.keys(CLIENTS))('%s: blackholed mid-flight on a kept-alive connection, aborted at the deadline', async (client) => {
    const call = CLIENTS[client];
    if (call === undefined) throw new Error(client);
    expect(await call(`http://${host.ip}:${PORT}/warm`)).toBe('hello'); // the keep-alive connection now exists
    host.blackhole(PORT);
    try {
      const { error, at, afterDeadlineMs } = await cut(underDeadlineIn(300), () => call(`http://${host.ip}:${PORT}/midflight`));
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(deadlineErrorOf(error)?.deadline).toBe(at);
      expect(afterDeadlineMs).toBeGreaterThanOrEqual(0);
    } finally {
      host.lift(PORT);
    }
  });

  it('once the blackhole is lifted, calls succeed again', async () => {
    const text = await withDeadline(Date.now() + 5_000, () => CLIENTS['global fetch']?.(`http://${host.ip}:${PORT}/again`));
    expect(text).toBe('hello');
  });
});

const NODE_HTTP_CLIENTS = ['node:http(s)', 'axios', 'got', 'node-fetch@2', '@aws-sdk/client-s3'] as const;

describe('node:http-based clients: a blackholed connect ends at the deadline', () => {
  it.each(NODE_HTTP_CLIENTS)('%s: connect phase (SYNs dropped) ended at the deadline, with a recognised error', async (client) => {
    const call = ALL_CLIENTS[client];
    if (call === undefined) throw new Error(client);
    host.blackhole(PORT);
    try {
      // No connection to the host is kept alive: each call's SYN meets the blackhole. Some of these
      // clients report the cut in words of their own, so the error is recognised, not unwrapped.
      const { error, afterDeadlineMs } = await cut(underDeadlineIn(300), () =>
        call(`http://${host.ip}:${PORT}/${client.replace(/\W/g, '')}`),
      );
      expect(isDeadlineExceeded(error), String(error)).toBe(true);
      expect(afterDeadlineMs).toBeGreaterThanOrEqual(0);
    } finally {
      host.lift(PORT);
    }
  });
});
