import { connect, createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { DiagnosticSnapshot, InFlightNode } from '../../src/diagnostics/index.js';
import { HealthCatalog, startProbeServer } from '../../src/index.js';
import { diagnosticsBody, MAX_DIAGNOSTICS_BYTES } from '../../src/probe/debug-diagnostics.js';
import { isLoopbackHost } from '../../src/probe/local-clients.js';
import { rawExchange } from '../support/raw-http.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function serve() {
  const health = new HealthCatalog();
  const server = await startProbeServer({
    health,
    port: 0,
    debugDiagnostics: true,
    logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
  });
  cleanup.push(
    () => {
      health.close();
    },
    () => server.close(),
  );
  return server;
}

function get(port: number, host: string | undefined): Promise<string> {
  const head =
    host === undefined
      ? 'GET /debug/diagnostics HTTP/1.0\r\n'
      : `GET /debug/diagnostics HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n`;
  return rawExchange(port, `${head}\r\n`).then((r) => r.answer);
}

describe('/debug/diagnostics refuses a Host that is not a loopback name (DNS rebinding)', () => {
  it('403 for another name over loopback, or no Host; 200 for localhost, 127.0.0.1 and [::1], with or without a port', async () => {
    const { port } = await serve();
    for (const host of ['evil.example', `evil.example:${port}`, 'localhost.evil.example', '127.0.0.1.nip.io', undefined]) {
      expect(await get(port, host), String(host)).toMatch(/^HTTP\/1\.[01] 403 [^]*"forbidden host"/);
    }
    for (const host of ['localhost', `localhost:${port}`, 'LOCALHOST', '127.0.0.1', `127.0.0.1:${port}`, '[::1]', `[::1]:${port}`]) {
      expect(await get(port, host), host).toMatch(/^HTTP\/1\.1 200 /);
    }
    // Probes do not care about Host: the kubelet sends the pod IP.
    expect((await rawExchange(port, 'GET /live HTTP/1.1\r\nHost: 10.1.2.3:5555\r\nConnection: close\r\n\r\n')).answer).toMatch(
      /^HTTP\/1\.1 200 /,
    );
  });

  it('isLoopbackHost takes exactly the loopback names', () => {
    expect(['localhost', 'localhost:1', '127.0.0.1:65535', '[::1]', '[::1]:80'].every(isLoopbackHost)).toBe(true);
    expect(
      [
        '',
        'localhost:',
        'localhost:123456',
        '127.0.0.1:80:80',
        '::1',
        '[::1]x',
        'localhost.',
        'a.localhost',
        '0.0.0.0',
        '[::ffff:127.0.0.1]',
      ].some(isLoopbackHost),
    ).toBe(false);
  });
});

describe('/debug/diagnostics stays cheap with many open sockets', () => {
  it('with 1,200 open sockets the handle list is one `omitted` entry and the call is cheap', async () => {
    const { port } = await serve();
    const peers: Socket[] = [];
    const sink = createServer((socket) => peers.push(socket));
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    const sinkPort = (sink.address() as { port: number }).port;
    cleanup.push(
      () => new Promise((resolve) => sink.close(resolve)),
      () => {
        for (const socket of peers) socket.destroy();
      },
    );
    await Promise.all(
      Array.from(
        { length: 600 },
        () =>
          new Promise<void>((resolve) => {
            peers.push(connect(sinkPort, '127.0.0.1', resolve));
          }),
      ),
    );
    while (peers.length < 1_200) await new Promise((resolve) => setTimeout(resolve, 10)); // and the sink accepted each
    // CPU time, not wall time: a loaded machine stretches the one, hardly the other.
    const cpuMs = () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1_000;
    };
    await (await fetch(`http://127.0.0.1:${port}/live`)).arrayBuffer(); // the client's own first-use cost is not the call's
    const started = performance.now();
    const cpuBefore = cpuMs();
    const res = await fetch(`http://127.0.0.1:${port}/debug/diagnostics`);
    const body = (await res.json()) as DiagnosticSnapshot;
    const callCpuMs = cpuMs() - cpuBefore;
    const ms = performance.now() - started;
    console.log(`/debug/diagnostics with 1,200 sockets: ${callCpuMs.toFixed(0)} ms of CPU (${ms.toFixed(0)} ms)`);
    expect(res.status).toBe(200);
    expect(body.process.handles).toEqual([
      { type: 'omitted', details: expect.stringMatching(/^\d+ active resources, over 1000: handles not listed/) as unknown },
    ]);
    expect(body.process.activeResources.TCPSocketWrap).toBeGreaterThanOrEqual(1_200);
    // Listing them cost 400–700 ms; a loaded machine stretches the wall time, not the CPU spent.
    expect(callCpuMs).toBeLessThan(250);
    expect(ms).toBeLessThan(2_000); // nothing waits on anything slow
  });
});

describe('the /debug/diagnostics body is capped', () => {
  const node = (depth: number, stackBytes: number): InFlightNode => ({
    name: 'GET',
    traceId: 'a'.repeat(32),
    spanId: 'b'.repeat(16),
    parentSpanId: undefined,
    ageMs: 1,
    startedAt: Date.parse('2026-01-01T00:00:00.000Z'),
    deadline: undefined,
    attributes: { 'url.full': 'http://x/' },
    origin: 'app.js:1',
    stack: 's'.repeat(stackBytes),
    children: depth === 0 ? [] : [node(depth - 1, stackBytes)],
  });
  const snapshot = (nodes: number, stackBytes: number, handles: number): DiagnosticSnapshot => ({
    at: Date.parse('2026-01-01T00:00:00.000Z'),
    unhealthy: ['worker'],
    components: [
      {
        name: 'worker',
        probe: 'liveness',
        tick: undefined,
        inFlight: Array.from({ length: nodes }, () => node(2, stackBytes)),
        omitted: 0,
      },
    ],
    process: {
      pid: 1,
      uptimeS: 1,
      handles: Array.from({ length: handles }, () => ({ type: 'tcp', details: 'x'.repeat(200) })),
      activeResources: { TCPSocketWrap: handles },
      eventLoopDelayMs: { p50: 0, p99: 0, max: 0 },
    },
    evicted: 0,
  });
  const parse = (body: Buffer) => JSON.parse(body.toString()) as DiagnosticSnapshot & { cut?: string[] };

  it('a body within the cap is served whole, with no `cut`', () => {
    const small = snapshot(3, 100, 3);
    expect(parse(diagnosticsBody(small))).toEqual(JSON.parse(JSON.stringify(small)));
  });

  it('cuts stacks first, then in-flight trees (counted as omitted), then the handle list, and says so', () => {
    const stacks = parse(diagnosticsBody(snapshot(100, 5_000, 10)));
    expect(stacks.cut).toEqual(['stacks']);
    expect(stacks.components[0]?.inFlight[0]?.origin).toBe('app.js:1');
    expect(stacks.components[0]?.inFlight[0]?.stack).toBeUndefined();

    const trees = parse(diagnosticsBody(snapshot(2_000, 10, 10)));
    expect(trees.cut).toEqual(['stacks', 'inFlight']);
    expect(trees.components[0]).toMatchObject({ inFlight: [], omitted: 6_000 });

    const all = diagnosticsBody(snapshot(2_000, 10, 2_000));
    expect(parse(all).cut).toEqual(['stacks', 'inFlight', 'handles']);
    expect(parse(all).process.activeResources).toEqual({ TCPSocketWrap: 2_000 });
    for (const body of [all, diagnosticsBody(snapshot(100, 5_000, 10)), diagnosticsBody(snapshot(2_000, 10, 10))])
      expect(body.byteLength).toBeLessThanOrEqual(MAX_DIAGNOSTICS_BYTES);
  });
});
