import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HealthCatalog, LifelineError, startProbeServer, type Logger, type ProbeServer, type ProbeServerOptions } from '../../src/index.js';
import { rawExchange } from '../support/raw-http.js';

/** How long a silent connection keeps its slot against newcomers (the server's rule), with a margin for timers. */
const SILENT_GRACE_MS = 350;

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

function recordingLogger(): Logger & { lines: { obj: object; msg: string }[] } {
  const lines: { obj: object; msg: string }[] = [];
  return {
    lines,
    warn: (obj, msg) => lines.push({ obj, msg }),
    info: (obj, msg) => lines.push({ obj, msg }),
    debug: () => undefined,
  };
}

/** A connection from `localAddress` that sends nothing; `closed` settles when the server closes it. */
async function hold(port: number, localAddress = '127.0.0.1'): Promise<{ socket: Socket; closed: Promise<unknown> }> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  cleanup.push(() => socket.destroy());
  socket.on('error', () => undefined);
  const closed = new Promise((resolve) => socket.once('close', resolve));
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, closed };
}

/** A kubelet-style probe from `localAddress`: a fresh connection, `GET /live`, `connection: close`. What it was answered (within 2 s). */
function probe(port: number, localAddress = '127.0.0.1'): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let answer = '';
    const timer = setTimeout(() => socket.destroy(), 2_000);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
    socket.write('GET /live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  });
}

async function serve(options: Partial<Omit<ProbeServerOptions, 'health' | 'logger'>> = {}) {
  const health = new HealthCatalog();
  const logger = recordingLogger();
  const server: ProbeServer = await startProbeServer({ health, port: 0, logger, ...options });
  cleanup.push(
    () => {
      health.close();
    },
    () => server.close(),
  );
  return { health, server, logger };
}

describe('probe server (docs/probes.md)', () => {
  it('serves 200 pass with JSON, no-store, when everything is healthy', async () => {
    const { server } = await serve();
    expect(server.url).toBe(`http://127.0.0.1:${server.port}`);
    for (const path of ['/live', '/ready', '/startup']) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(await res.json()).toEqual({ status: 'pass', healthy: ['healthcheck'], unhealthy: [] });
    }
  });

  it('serves 503 fail per probe, following the catalog verdicts', async () => {
    const { health, server } = await serve();
    const listener = health.registerLiveness('listener');
    health.registerReadiness('forwarder');
    let res = await fetch(`${server.url}/live`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'fail', healthy: ['healthcheck'], unhealthy: ['listener'] });
    listener.take();
    health.runRound();
    res = await fetch(`${server.url}/live`);
    expect(res.status).toBe(200);
    res = await fetch(`${server.url}/ready`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'fail', healthy: ['healthcheck', 'listener'], unhealthy: ['forwarder'] });
    res = await fetch(`${server.url}/startup`);
    expect(res.status).toBe(200);
  });

  it('HEAD answers the same status with no body; a query string is ignored', async () => {
    const { health, server } = await serve();
    health.registerLiveness('x');
    const head = await fetch(`${server.url}/live`, { method: 'HEAD' });
    expect(head.status).toBe(503);
    expect(await head.text()).toBe('');
    expect(Number(head.headers.get('content-length'))).toBeGreaterThan(0);
    expect((await fetch(`${server.url}/live?verbose=1`)).status).toBe(503);
  });

  it('unknown path 404, other methods 405, no internals in bodies', async () => {
    const { server } = await serve();
    const notFound = await fetch(`${server.url}/nope`);
    expect(notFound.status).toBe(404);
    expect(await notFound.json()).toEqual({ error: 'not found' });
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const res = await fetch(`${server.url}/ready`, { method, body: method === 'POST' ? 'x'.repeat(100) : null });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
      expect(await res.json()).toEqual({ error: 'method not allowed' });
    }
    expect((await fetch(`${server.url}/debug/diagnostics`)).status).toBe(404); // off by default
  });

  it('answers garbage bytes with a bare 400 and closes, and keeps serving', async () => {
    const { server } = await serve();
    for (const garbage of [
      '\x00\x01\x02\xff\r\n\r\n',
      'GET /live HTTP/9.9 nonsense\r\n\r\n',
      'HELLO\r\n\r\n',
      `GET /${'a'.repeat(20_000)} HTTP/1.1\r\n\r\n`,
    ]) {
      const { answer, closed } = await rawExchange(server.port, Buffer.from(garbage, 'latin1'));
      expect(closed).toBe(true);
      expect(answer).toMatch(/^HTTP\/1\.1 (400|431) /);
      expect(answer).not.toMatch(/at |Error|node:/);
    }
    expect((await fetch(`${server.url}/live`)).status).toBe(200);
  });

  it('drops a client that never finishes its request, with 408', async () => {
    const { server } = await serve({ requestTimeoutMs: 300 });
    const { answer, closed, ms } = await rawExchange(server.port, 'GET /live HTTP/1.1\r\nHost: x\r\n', { timeoutMs: 5_000 });
    expect(closed).toBe(true);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(3_000);
    expect((await fetch(`${server.url}/live`)).status).toBe(200);
  });

  it('logs healthcheck failed at INFO with the unhealthy names, rate-limited', async () => {
    const { health, server, logger } = await serve({ failureLogIntervalMs: 60_000 });
    health.registerLiveness('stuck');
    for (let i = 0; i < 5; i++) await fetch(`${server.url}/live`);
    expect(logger.lines).toEqual([{ obj: { probe: 'liveness', unhealthy: ['stuck'] }, msg: 'healthcheck failed' }]);
    health.registerLiveness('also-stuck'); // a new failing set is logged at once
    await fetch(`${server.url}/live`);
    await fetch(`${server.url}/ready`);
    expect(logger.lines.map((l) => l.obj)).toEqual([
      { probe: 'liveness', unhealthy: ['stuck'] },
      { probe: 'liveness', unhealthy: ['also-stuck', 'stuck'] },
      { probe: 'readiness', unhealthy: ['also-stuck', 'stuck'] },
    ]);
  });

  it('answers from cached verdicts while a component is stuck', async () => {
    const { health, server } = await serve();
    const h = health.registerLiveness('blocked');
    h.take();
    health.runRound();
    const tick = h.take();
    // The component's work never settles; the probe must not care.
    void tick?.run(() => new Promise(() => undefined));
    const started = Date.now();
    const res = await fetch(`${server.url}/live`);
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('where the event loop is blocked (code locations) is shown only to a client on this machine; others see for how long', async () => {
    const eventLoop = {
      blockedMs: 4_200,
      blockedIn: 'crunchReport (/srv/app/report.mjs:14)',
      frames: ['crunchReport (/srv/app/report.mjs:14:3)'],
    };
    const blocked = { ok: false, healthy: [], unhealthy: ['healthcheck'], eventLoop };
    const server = await startProbeServer({
      health: { status: () => blocked, diagnose: () => Promise.reject(new Error('blocked')) },
      port: 0,
      logger: recordingLogger(),
    });
    cleanup.push(() => server.close());
    const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as unknown;
    const local = await rawExchange(
      server.port,
      `GET /live HTTP/1.1\r\nhost: localhost:${String(server.port)}\r\nconnection: close\r\n\r\n`,
    );
    expect(local.answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(bodyOf(local.answer)).toEqual({ status: 'fail', healthy: [], unhealthy: ['healthcheck'], eventLoop });
    // The kubelet probes by the pod's address; a page rebinding its DNS name to loopback sends its own name.
    for (const host of ['10.1.2.3:5555', 'rebind.example:5555']) {
      const remote = await rawExchange(server.port, `GET /live HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`);
      expect(remote.answer).toMatch(/^HTTP\/1\.1 503 /);
      expect(bodyOf(remote.answer)).toEqual({ status: 'fail', healthy: [], unhealthy: ['healthcheck'], eventLoop: { blockedMs: 4_200 } });
    }
  });

  it('close() is idempotent and frees the port', async () => {
    const { server } = await serve();
    await Promise.all([server.close(), server.close()]);
    await expect(fetch(`${server.url}/live`)).rejects.toThrow();
  });

  it('rejects invalid options naming the option and value', async () => {
    const health = new HealthCatalog();
    for (const [options, text] of [
      [{ port: -1 }, 'port: -1'],
      [{ port: 70_000 }, 'port: 70000'],
      [{ port: 1.5 }, 'port: 1.5'],
      [{ host: '' }, 'host: ""'],
      [{ requestTimeoutMs: 0 }, 'requestTimeoutMs: 0'],
      [{ maxConnections: 0 }, 'maxConnections: 0'],
      [{ maxConnectionsPerAddress: 0 }, 'maxConnectionsPerAddress: 0'],
      [{ maxRequestsPerConnection: 2.5 }, 'maxRequestsPerConnection: 2.5'],
      [{ maxUnsentBytes: -1 }, 'maxUnsentBytes: -1'],
      [{ maxRequestsPerSecond: Infinity }, 'maxRequestsPerSecond: Infinity'],
    ] as const) {
      const error = await startProbeServer({ health, ...options }).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(LifelineError);
      expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION' });
      expect((error as Error).message).toContain(text);
    }
  });

  it('a taken port rejects with the listen error', async () => {
    const { server } = await serve();
    await expect(startProbeServer({ health: new HealthCatalog(), port: server.port })).rejects.toMatchObject({ code: 'EADDRINUSE' });
  });

  it('binds loopback by default outside Kubernetes, all interfaces inside', async () => {
    const saved = process.env.KUBERNETES_SERVICE_HOST;
    try {
      delete process.env.KUBERNETES_SERVICE_HOST;
      const local = await startProbeServer({ health: new HealthCatalog(), port: 0, logger: recordingLogger() });
      cleanup.push(() => local.close());
      expect(local.url).toBe(`http://127.0.0.1:${local.port}`);
      process.env.KUBERNETES_SERVICE_HOST = '10.0.0.1';
      const cluster = await startProbeServer({ health: new HealthCatalog(), port: 0, logger: recordingLogger() });
      cleanup.push(() => cluster.close());
      // Bound to 0.0.0.0: reachable on a non-127.0.0.1 loopback address too.
      expect((await fetch(`http://127.0.0.2:${cluster.port}/live`)).status).toBe(200);
      await expect(fetch(`http://127.0.0.2:${local.port}/live`)).rejects.toThrow();
    } finally {
      if (saved === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
      else process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });

  it('answers at most maxRequestsPerConnection on a kept-alive connection, the last with connection: close, then closes it', async () => {
    const { server } = await serve({ maxRequestsPerConnection: 5 });
    const socket = connect(server.port, '127.0.0.1');
    cleanup.push(() => socket.destroy());
    let answer = '';
    const ask = () => socket.write('GET /live HTTP/1.1\r\nHost: x\r\n\r\n');
    socket.setEncoding('latin1');
    // One request at a time, the next when an answer comes, as a keep-alive client does.
    socket.on('data', (chunk: string) => {
      answer += chunk;
      if (chunk.includes('"pass"') && !chunk.includes('connection: close')) ask();
    });
    socket.on('connect', ask);
    await new Promise((resolve) => socket.on('close', resolve));
    expect(answer.match(/HTTP\/1\.1 200 /g)).toHaveLength(5);
    expect(answer.match(/connection: close/gi)).toHaveLength(1);
  });

  it('cuts off a client that pipelines past maxRequestsPerConnection', async () => {
    const { server } = await serve({ maxRequestsPerConnection: 5 });
    const { answer, closed } = await rawExchange(server.port, 'GET /live HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(50));
    expect(closed).toBe(true);
    expect((answer.match(/HTTP\/1\.1 200 /g) ?? []).length).toBeLessThanOrEqual(5);
    expect((await fetch(`${server.url}/live`)).status).toBe(200);
  });

  it('cuts off a client that keeps asking while more than maxUnsentBytes of its answers are unsent', async () => {
    const { server } = await serve({ maxUnsentBytes: 1_000, maxRequestsPerConnection: 1_000 });
    // 50 pipelined requests in one write: the answers queue in Node behind the first.
    const { answer, closed } = await rawExchange(server.port, 'GET /live HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(50));
    expect(closed).toBe(true);
    expect((answer.match(/HTTP\/1\.1 200 /g) ?? []).length).toBeLessThan(10);
    expect((await fetch(`${server.url}/live`)).status).toBe(200);
  });

  it('past maxConnections, a new connection takes the slot of one that has sent nothing for 300 ms; a young, half-sent or idle one keeps it', async () => {
    const { server } = await serve({ maxConnections: 2, maxOverflowConnections: 0 });
    const [silent, halfSent] = await Promise.all([hold(server.port), hold(server.port)]);
    halfSent.socket.write('GET /live HTTP/1.1\r\nHost: x\r\n');
    // Both just accepted: a prober may not have sent its request yet, so neither is closed for it.
    expect(await probe(server.port)).toBe('');
    await new Promise((resolve) => setTimeout(resolve, SILENT_GRACE_MS));
    expect(await probe(server.port)).toMatch(/^HTTP\/1\.1 200 /);
    await silent.closed;
    expect(halfSent.socket.destroyed).toBe(false);
    // Answered and idle on a kept-alive connection: it has spoken, its keep-alive timeout ends it.
    const idle = await hold(server.port);
    idle.socket.write('GET /live HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => idle.socket.once('data', resolve));
    await new Promise((resolve) => setTimeout(resolve, SILENT_GRACE_MS));
    expect(await probe(server.port)).toBe('');
    expect(halfSent.socket.destroyed).toBe(false);
    expect(idle.socket.destroyed).toBe(false);
  });

  it('past maxConnectionsPerAddress, a new connection takes the slot of a silent one of its own address', async () => {
    const { server } = await serve({ maxConnectionsPerAddress: 2, maxOverflowConnections: 0 });
    const [first, second] = [await hold(server.port), await hold(server.port)];
    const other = await hold(server.port, '127.0.0.2');
    await new Promise((resolve) => setTimeout(resolve, SILENT_GRACE_MS));
    expect(await probe(server.port)).toMatch(/^HTTP\/1\.1 200 /);
    await first.closed;
    expect(second.socket.destroyed).toBe(false);
    expect(other.socket.destroyed).toBe(false);
    // Another address has slots of its own: nothing of 127.0.0.1's is closed for it.
    expect(await probe(server.port, '127.0.0.2')).toMatch(/^HTTP\/1\.1 200 /);
    expect(second.socket.destroyed).toBe(false);
    expect(other.socket.destroyed).toBe(false);
  });

  it('past the caps a new connection overflows: read and answered once with connection: close; when full, a silent one of the address holding the most gives way', async () => {
    const { server } = await serve({ maxConnections: 1, maxOverflowConnections: 1 });
    const holder = await hold(server.port);
    holder.socket.write('GET /live HTTP/1.1\r\n'); // has spoken: keeps its slot
    const overflowing = await hold(server.port);
    // The overflow holds one of this address, silent: even that young, it gives way to the newcomer
    // of its own address, which is answered and not kept alive.
    const { answer } = await rawExchange(server.port, 'GET /live HTTP/1.1\r\nHost: x\r\n\r\n', { timeoutMs: 2_000 });
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/connection: close/i);
    await overflowing.closed;
    expect(holder.socket.destroyed).toBe(false);
  });

  it('a full overflow turns away a newcomer only if its own address holds the most and all its own are talking; another address takes their place', async () => {
    const { server } = await serve({ maxConnections: 1, maxOverflowConnections: 2 });
    const holder = await hold(server.port);
    holder.socket.write('GET /live HTTP/1.1\r\n');
    // Two overflowing connections of 127.0.0.1, each part-way through a request.
    const talking = [await hold(server.port), await hold(server.port)];
    for (const { socket } of talking) socket.write('GET /live HTTP/1.1\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50)); // read by the server
    expect(await probe(server.port)).toBe('');
    // 127.0.0.2 holds none: the oldest of the address holding the most gives way, talking or not.
    expect(await probe(server.port, '127.0.0.2')).toMatch(/^HTTP\/1\.1 200 /);
    await talking[0]?.closed;
    expect(talking[1]?.socket.destroyed).toBe(false);
    expect(holder.socket.destroyed).toBe(false);
  });

  it('an overflowing connection may send one request of at most 4 KiB: one that pipelines or trickles headers past it is cut off at once', async () => {
    const { server } = await serve({ maxConnections: 1, maxOverflowConnections: 4 });
    const holder = await hold(server.port);
    holder.socket.write('GET /live HTTP/1.1\r\n');
    // Two requests in one read: dropped unparsed, neither answered.
    const pipelined = await rawExchange(server.port, 'GET /live HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(2), { timeoutMs: 2_000 });
    expect(pipelined.closed).toBe(true);
    expect(pipelined.answer).toBe('');
    // Headers trickled past 4 KiB: cut off then, not held for requestTimeoutMs (5 s).
    const trickler = await hold(server.port);
    trickler.socket.write('GET /live HTTP/1.1\r\nHost: x\r\n');
    const started = performance.now();
    const line = `x-pad: ${'a'.repeat(1_000)}\r\n`;
    const trickle = setInterval(() => trickler.socket.write(line), 20);
    cleanup.push(() => {
      clearInterval(trickle);
    });
    await trickler.closed;
    clearInterval(trickle);
    expect(performance.now() - started).toBeLessThan(2_000);
    // A probe's request still fits: answered once.
    expect(await probe(server.port)).toMatch(/^HTTP\/1\.1 200 /);
    expect(holder.socket.destroyed).toBe(false);
  });

  it('reads at most maxRequestsPerSecond under a flood, while a fresh probe connection is answered at once', async () => {
    const { server } = await serve({ maxRequestsPerSecond: 50 });
    let answered = 0;
    const flooders = Array.from({ length: 10 }, () => {
      const socket = connect(server.port, '127.0.0.1');
      const ask = () => socket.write('GET /live HTTP/1.1\r\nHost: x\r\n\r\n');
      socket.setEncoding('latin1');
      // One request at a time, the next as soon as an answer comes: as fast as the server reads.
      socket.on('data', (chunk: string) => {
        for (let i = chunk.indexOf('"pass"'); i !== -1; i = chunk.indexOf('"pass"', i + 1)) {
          answered++;
          ask();
        }
      });
      socket.on('error', () => undefined);
      socket.on('connect', ask);
      return socket;
    });
    cleanup.push(() => {
      for (const socket of flooders) socket.destroy();
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const started = performance.now();
    const { answer } = await rawExchange(server.port, 'GET /live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const probeMs = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const socket of flooders) socket.destroy();
    // 1 s at 50/s, a burst of 5, and one answer in flight per flooder when it is paused.
    expect(answered).toBeGreaterThan(20);
    expect(answered).toBeLessThan(50 + 5 + 10 + 15);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(probeMs).toBeLessThan(500);
  });
});
