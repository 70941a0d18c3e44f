import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HealthCatalog, startProbeServer } from '../../src/index.js';
import { runNode } from '../support/node.js';

const BIN = 'dist/cli/main.js';
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function probeServer() {
  const health = new HealthCatalog();
  const server = await startProbeServer({
    health,
    port: 0,
    logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
  });
  cleanup.push(
    () => {
      health.close();
    },
    () => server.close(),
  );
  return { health, server };
}

describe('lifeline health (docs/probes.md)', () => {
  it('prints PASS and exits 0 when healthy', async () => {
    const { health, server } = await probeServer();
    const poller = health.registerLiveness('poller');
    poller.take();
    health.runRound();
    const result = await runNode([BIN, 'health', '--url', server.url]);
    expect(result.stdout).toBe('Health: PASS\n=== 2 healthy components ===\nhealthcheck, poller\n=== 0 unhealthy components ===\n');
    expect(result.code).toBe(0);
  });

  it('prints FAIL and exits 1 when a component is unhealthy, per --probe', async () => {
    const { health, server } = await probeServer();
    health.registerReadiness('forwarder');
    const ready = await runNode([BIN, 'health', '--url', server.url, '--probe', 'ready']);
    expect(ready.stdout).toBe('Health: FAIL\n=== 1 healthy components ===\nhealthcheck\n=== 1 unhealthy components ===\nforwarder\n');
    expect(ready.code).toBe(1);
    const live = await runNode([BIN, 'health', '--url', `${server.url}/`, '--probe', 'live']);
    expect(live.code).toBe(0);
  });

  it('--json prints the probe body', async () => {
    const { health, server } = await probeServer();
    health.registerStartup('warmup');
    const result = await runNode([BIN, 'health', '--url', server.url, '--probe', 'startup', '--json']);
    expect(JSON.parse(result.stdout)).toEqual({ status: 'fail', healthy: ['healthcheck'], unhealthy: ['warmup'] });
    expect(result.code).toBe(1);
  });

  it('exits 2 and says why when nothing listens', async () => {
    const { server } = await probeServer();
    const url = server.url;
    await server.close();
    const result = await runNode([BIN, 'health', '--url', url]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`could not reach ${url}/ready`);
    expect(result.stderr).toContain('ECONNREFUSED');
  });

  it('exits 2 after --timeout when the server never answers', async () => {
    const silent = createServer(() => undefined); // accepts, never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => {
      silent.closeAllConnections();
      silent.close();
    });
    const port = (silent.address() as AddressInfo).port;
    const result = await runNode([BIN, 'health', '--url', `http://127.0.0.1:${port}`, '--timeout', '300ms']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('no answer within 300 ms');
    expect(result.ms).toBeLessThan(5_000);
  });

  it('exits 2 on an answer that is not a lifeline probe', async () => {
    const other = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('OK'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => other.close());
    const result = await runNode([BIN, 'health', '--url', `http://127.0.0.1:${(other.address() as AddressInfo).port}`]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('unexpected answer');
  });

  it.each([
    [['health', '--probe', 'alive'], 'invalid --probe "alive"'],
    [['health', '--timeout', 'soon'], 'invalid --timeout "soon"'],
    [['health', '--timeout', '0s'], 'invalid --timeout "0s"'],
    [['health', '--url', 'ftp://x'], 'invalid --url "ftp://x"'],
    [['health', '--url', 'not a url'], 'invalid --url'],
    [['health', '--bogus'], "Unknown option '--bogus'"],
    [['health', 'extra'], 'extra'],
    [['frobnicate'], 'unknown command "frobnicate"'],
    [[], 'Usage: lifeline'],
  ])('bad arguments %j exit 2 with a message', async (args, message) => {
    const result = await runNode([BIN, ...args]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
    expect(result.stdout).toBe('');
  });

  it('--help prints usage and exits 0; no colour when not a TTY', async () => {
    const result = await runNode([BIN, 'health', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Usage: lifeline health');
    const { server } = await probeServer();
    const plain = await runNode([BIN, 'health', '--url', server.url]);
    expect(plain.stdout).not.toContain('\u001b[');
  });
});
