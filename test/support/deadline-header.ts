import type { IncomingHttpHeaders } from 'node:http';
import { expect } from 'vitest';
import { withTimeout } from '../../src/index.js';
import { serve, type TestServer } from './servers.js';

/** A loopback server that answers `ok` and keeps each request's headers by its first two path segments (an S3 client adds its own). */
export async function recordingServer(): Promise<TestServer & { seen: Map<string, IncomingHttpHeaders> }> {
  const seen = new Map<string, IncomingHttpHeaders>();
  const server = await serve((req, res) => {
    seen.set((req.url ?? '').split(/[/?]/).slice(0, 3).join('/'), req.headers);
    res.end('ok');
  });
  return { ...server, seen };
}

/**
 * Calls the recording server as client `name`: under a 5 s deadline at 127.0.0.1, localhost and
 * service.example.com (all resolving to loopback), with no deadline (the headers bound), and at
 * `/ruled/<name>`, which a 10 s policy rule matches; then checks that x-request-timeout-ms went
 * to the internal hosts only, carrying the deadline the call got, and not for the headers bound.
 */
export async function expectDeadlineHeaderToInternalHosts(
  server: Awaited<ReturnType<typeof recordingServer>>,
  name: string,
  call: (url: string) => Promise<unknown>,
): Promise<void> {
  const url = (path: string, host = '127.0.0.1') => `http://${host}:${String(server.port)}${path}`;
  await withTimeout(5_000, () => call(url(`/${name}/ip`)));
  await withTimeout(5_000, () => call(url(`/${name}/localhost`, 'localhost')));
  await withTimeout(5_000, () => call(url(`/${name}/public`, 'service.example.com')));
  await call(url(`/${name}/unbounded`));
  await call(url(`/ruled/${name}`));
  const { seen } = server;
  for (const path of ['ip', 'localhost']) {
    const budget = Number(seen.get(`/${name}/${path}`)?.['x-request-timeout-ms']);
    expect(budget, path).toBeGreaterThan(3_000);
    expect(budget, path).toBeLessThanOrEqual(5_000);
  }
  expect(seen.get(`/${name}/public`)?.host).toBe(`service.example.com:${String(server.port)}`);
  expect(seen.get(`/${name}/public`)?.['x-request-timeout-ms']).toBeUndefined();
  expect(seen.get(`/${name}/unbounded`)?.['x-request-timeout-ms']).toBeUndefined();
  // A rule's deadline is the one the callee hears of (the call has no other).
  expect(Number(seen.get(`/ruled/${name}`)?.['x-request-timeout-ms'])).toBeGreaterThan(8_000);
}
