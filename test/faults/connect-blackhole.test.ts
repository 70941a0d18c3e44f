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
  type InstalledHttpDeadlines,
} from '../../src/index.js';
import { CLIENTS as ALL_CLIENTS, lateness } from '../support/clients.js';
import { instrumentedUndici } from '../support/instrumented.js';
import { ROOT } from '../support/node.js';
import { createTestHost, type TestHost } from '../support/netns.js';

const PORT = 8080;
const tracing = instrumentedUndici([new DeadlineSpanProcessor()]);
const { exporter } = tracing;
let host: TestHost;
let installed: InstalledDeadlineDispatcher;
let httpDeadlines: InstalledHttpDeadlines;
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
      const at = Date.now() + 300;
      const error = await withDeadline(at, () => call(`http://${host.ip}:${PORT}/${client.replace(/\W/g, '')}`)).catch(
        (err: unknown) => err,
      );
      const late = Date.now() - at;
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(late).toBeGreaterThanOrEqual(0);
      expect(late).toBeLessThan(150);
      const [span] = exporter.getFinishedSpans();
      expect(span?.status.code).toBe(SpanStatusCode.ERROR);
      expect(span?.attributes['error.type']).toBe('timeout');
      expect(span?.attributes['lifeline.deadline.exceeded']).toBe(true);
      const endMs = (span?.endTime[0] ?? 0) * 1_000 + (span?.endTime[1] ?? 0) / 1e6;
      expect(endMs - at).toBeLessThan(150);
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
      const at = Date.now() + 300;
      const error = await withDeadline(at, () => call(`http://${host.ip}:${PORT}/midflight`)).catch((err: unknown) => err);
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(Date.now() - at).toBeGreaterThanOrEqual(0);
      expect(Date.now() - at).toBeLessThan(150);
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
      // No connection to the host is kept alive: each call's SYN meets the blackhole.
      const { error, lateMs } = await lateness(300, () => call(`http://${host.ip}:${PORT}/${client.replace(/\W/g, '')}`));
      expect(isDeadlineExceeded(error), String(error)).toBe(true);
      expect(lateMs).toBeGreaterThanOrEqual(0);
      expect(lateMs).toBeLessThan(50);
    } finally {
      host.lift(PORT);
    }
  });
});
