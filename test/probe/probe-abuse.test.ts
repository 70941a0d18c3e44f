import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthCatalog, startProbeServer } from '../../src/index.js';
import { ROOT } from '../support/node.js';
import { describeStorm, probeOnce, probesUnderSilentFlood, type StormShape } from '../support/probe-storm.js';

/**
 * Clients that pipeline requests and never read, against the built probe server in a process of
 * its own (its memory is the server's alone), while a kubelet-like prober asks every 500 ms. Small
 * on purpose (30 connections × 64 KiB × 2 waves, ~4 MB): the shape of the attack, not its size.
 */
const ATTACKERS = 30;
const WAVES = 2;
const BYTES_PER_CONNECTION = 64 * 1024;
const PROBE_EVERY_MS = 500;
/** The kubelet's default `timeoutSeconds`. */
const KUBELET_TIMEOUT_MS = 1_000;
/**
 * CPU time the server may spend on the whole burst (~3.75 MB of pipelined requests). CPU time, not
 * wall time: a loaded machine stretches the one, hardly the other. Node parsing every request of
 * each 64 KiB read (~108,000 in all) before the limits cut a client off cost ~2,000 ms; dropped
 * unparsed, the reads cost ~50 ms.
 */
const BURST_CPU_MS = 400;

const SERVER = `
import { HealthCatalog, startProbeServer } from 'otel-lifeline';
const health = new HealthCatalog();
const probe = await startProbeServer({ health, port: 0, logger: { warn() {}, info() {}, debug() {} } });
process.on('message', ({ what, id }) => {
  if (what === 'gc') globalThis.gc();
  const { rss, heapUsed, external } = process.memoryUsage();
  const { user, system } = process.cpuUsage();
  process.send({ id, rss, heap: heapUsed + external, cpuMs: (user + system) / 1_000 });
});
process.on('disconnect', () => process.exit(0));
process.send({ port: probe.port });
`;

let child: ChildProcess;
let port: number;

interface Memory {
  rss: number;
  /** V8 heap used plus external (buffers): what the server holds, whatever the allocator keeps. */
  heap: number;
  /** CPU time the server's process has used so far. */
  cpuMs: number;
}

let asked = 0;

/** The server's answer to this question (the sampler asks too, so answers are told apart by id). */
function ask(what: 'memory' | 'gc'): Promise<Memory> {
  const id = ++asked;
  return new Promise((resolve) => {
    const mine = (m: Memory & { id: number }) => {
      if (m.id !== id) return;
      child.off('message', mine);
      resolve(m);
    };
    child.on('message', mine);
    child.send({ what, id });
  });
}

/**
 * Writes pipelined `GET /live`s (`bytes` at once, then one every 100 ms) and never reads. Resolves
 * with ms until the server closed it, or undefined if it stayed open for `giveUpMs`. A client that
 * does not read learns of the close only by writing (EPIPE or a reset), as a real abuser would.
 */
function abuse(bytes: number, giveUpMs: number): Promise<number | undefined> {
  const started = performance.now();
  const request = Buffer.from('GET /live HTTP/1.1\r\nHost: probe\r\n\r\n');
  const chunk = Buffer.concat(Array.from({ length: Math.floor(16_384 / request.length) }, () => request));
  return new Promise((resolve) => {
    const socket: Socket = connect(port, '127.0.0.1');
    socket.pause(); // never read: answers pile up in the server
    let sent = 0;
    const trickle = setInterval(() => {
      if (sent >= bytes && !socket.destroyed) socket.write(request);
    }, 100);
    const timer = setTimeout(() => {
      clearInterval(trickle);
      socket.destroy();
      resolve(undefined);
    }, giveUpMs);
    const write = () => {
      while (sent < bytes && !socket.destroyed) {
        sent += chunk.length;
        if (!socket.write(chunk)) {
          socket.once('drain', write);
          return;
        }
      }
    };
    socket.on('connect', write);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      clearInterval(trickle);
      resolve(performance.now() - started);
    });
  });
}

describe('the probe server against clients that pipeline and never read', () => {
  beforeAll(async () => {
    child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', SERVER], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    port = await new Promise<number>((resolve) =>
      child.once('message', (m) => {
        resolve((m as { port: number }).port);
      }),
    );
  });
  afterAll(() => {
    child.kill();
  });

  it('cuts them off at little cost, answers probes within the kubelet timeout during and after the burst, and gives the memory back', async () => {
    await ask('gc');
    const baseline = await ask('gc');
    const probes: { at: number; ms: number | undefined }[] = [];
    const t0 = performance.now();
    const state = { probing: true };
    const prober = (async () => {
      while (state.probing) {
        const at = performance.now() - t0;
        probes.push({ at, ms: await probeOnce(port, KUBELET_TIMEOUT_MS) });
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, PROBE_EVERY_MS - (performance.now() - t0 - at))));
      }
    })();
    const peak = { ...baseline };
    const sampler = setInterval(() => {
      void ask('memory').then((m) => {
        peak.rss = Math.max(peak.rss, m.rss);
        peak.heap = Math.max(peak.heap, m.heap);
      });
    }, 250);

    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const burstStart = performance.now() - t0;
    const cpuBefore = (await ask('memory')).cpuMs;
    const closedAfter: (number | undefined)[] = [];
    // A probe sent with each wave, among the abusers' writes, besides the prober's.
    const amid: (number | undefined)[] = [];
    for (let wave = 0; wave < WAVES; wave++) {
      const attack = Promise.all(Array.from({ length: ATTACKERS }, () => abuse(BYTES_PER_CONNECTION, 8_000)));
      amid.push(await probeOnce(port, KUBELET_TIMEOUT_MS));
      closedAfter.push(...(await attack));
    }
    const burstCpuMs = (await ask('memory')).cpuMs - cpuBefore;
    const burstEnd = performance.now() - t0;
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    state.probing = false;
    await prober;
    clearInterval(sampler);
    await ask('gc');
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // V8 unmaps freed pages in the background
    const after = await ask('gc');

    const during = probes.filter((p) => p.at >= burstStart && p.at < burstEnd);
    const recovered = probes.filter((p) => p.at >= burstEnd);
    const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
    const worst = (list: typeof probes) => (list.length === 0 ? '-' : Math.max(...list.map((p) => p.ms ?? Infinity)).toFixed(0));
    console.log(
      `probe abuse: ${closedAfter.filter((ms) => ms !== undefined).length}/${closedAfter.length} abusers closed by the server, slowest after ${Math.max(...closedAfter.map((ms) => ms ?? Infinity)).toFixed(0)} ms; ` +
        `burst ${(burstEnd - burstStart).toFixed(0)} ms, ${burstCpuMs.toFixed(0)} ms of the server's CPU; probes amid the waves ${amid.filter((ms) => ms !== undefined).length}/${amid.length} ok, during ${during.filter((p) => p.ms !== undefined).length}/${during.length} ok (worst ${worst(during)} ms), after ${recovered.filter((p) => p.ms !== undefined).length}/${recovered.length} ok (worst ${worst(recovered)} ms); ` +
        `RSS baseline ${mb(baseline.rss)} MB, peak ${mb(peak.rss)} MB, after ${mb(after.rss)} MB; heap+external ${mb(baseline.heap)} → peak ${mb(peak.heap)} → ${mb(after.heap)} MB`,
    );

    expect(closedAfter.every((ms) => ms !== undefined && ms < 5_000)).toBe(true);
    expect(burstCpuMs).toBeLessThan(BURST_CPU_MS);
    expect(amid.every((ms) => ms !== undefined)).toBe(true);
    expect(during.every((p) => p.ms !== undefined)).toBe(true);
    expect(recovered.length).toBeGreaterThanOrEqual(5);
    expect(recovered.every((p) => p.ms !== undefined && p.ms < KUBELET_TIMEOUT_MS)).toBe(true);
    // What the server holds comes back. RSS is reported, not asserted: V8 and malloc keep the pages
    // of a transient peak mapped (the reads in flight, and the answers of those that stay within
    // the limits).
    expect(after.heap - baseline.heap).toBeLessThan(5 * 2 ** 20);
  }, 30_000);
});

/**
 * Slow clients that reconnect when cut, as in the review that found the global connection cap
 * unfair: each connects and sends nothing (half of them) or the start of a request and then a header
 * line every 500 ms, and reconnects at once when the server closes it. Plain JavaScript in a process
 * of its own, so the server under test shares its event loop only with the prober.
 */
const SLOW_CLIENTS = `
import { connect } from 'node:net';
const [port, count] = process.argv.slice(-2).map(Number);
let running = true, connected = 0, connects = 0;
function client(i) {
  if (!running) return;
  connects++;
  const socket = connect(port, '127.0.0.1');
  let trickle;
  socket.on('connect', () => {
    if (++connected === count) process.send('ready');
    if (i % 2 === 1) {
      socket.write('GET /live HTTP/1.1\\r\\nHost: probe\\r\\n');
      trickle = setInterval(() => socket.write('x-slow: 1\\r\\n'), 500);
    }
  });
  socket.on('error', () => undefined);
  socket.on('close', () => {
    clearInterval(trickle);
    setImmediate(client, i);
  });
}
for (let i = 0; i < count; i++) client(i);
process.on('message', () => {
  running = false;
  process.send({ connects });
});
process.on('disconnect', () => process.exit(0));
`;

/** More than the default 64 connections (and 16 per address), all from 127.0.0.1. */
const SLOW_CLIENT_COUNT = 80;
/** Probes every 100 ms, alternately through a mesh sidecar (127.0.0.1, the slow clients' address) and from the node's IP (127.0.0.2 here). */
const KUBELET_PROBES = 30;
const KUBELET_PERIOD_MS = 100;
const KUBELET_SOURCES = ['127.0.0.1', '127.0.0.2'] as const;
/** The kubelet's default `timeoutSeconds`. */
const KUBELET_PROBE_TIMEOUT_MS = 1_000;

interface AttackResult {
  /** Ms to a 200 per probe (undefined: failed), by where it came from. */
  probes: { from: string; ms: number | undefined }[];
  /** Connections the slow clients opened: each one past the first 80 followed a close by the server. */
  slowConnects: number;
}

/** Kubelet-style probes (a fresh connection each) against `port` while the slow clients attack it. */
async function probesUnderSlowClients(port: number): Promise<AttackResult> {
  const attack = spawn(process.execPath, ['--input-type=module', '-e', SLOW_CLIENTS, String(port), String(SLOW_CLIENT_COUNT)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  try {
    await new Promise((resolve) => attack.once('message', resolve)); // every slow client has connected once
    const probes = await Promise.all(
      Array.from({ length: KUBELET_PROBES }, async (_, i) => {
        await new Promise((resolve) => setTimeout(resolve, i * KUBELET_PERIOD_MS));
        const from = KUBELET_SOURCES[i % KUBELET_SOURCES.length] ?? '127.0.0.1';
        return { from, ms: await probeOnce(port, KUBELET_PROBE_TIMEOUT_MS, from) };
      }),
    );
    const { connects } = await new Promise<{ connects: number }>((resolve) => {
      attack.once('message', (m) => {
        resolve(m as { connects: number });
      });
      attack.send('stop');
    });
    return { probes, slowConnects: connects };
  } finally {
    attack.kill();
  }
}

function ok(result: AttackResult): number {
  return result.probes.filter((p) => p.ms !== undefined).length;
}

function said(result: AttackResult): string {
  const bySource = KUBELET_SOURCES.map((from) => {
    const mine = result.probes.filter((p) => p.from === from);
    const worst = Math.max(...mine.map((p) => p.ms ?? Infinity));
    return `from ${from} ${ok({ ...result, probes: mine })}/${mine.length} ok (worst ${Number.isFinite(worst) ? `${worst.toFixed(0)} ms` : 'timed out'})`;
  });
  return `${bySource.join(', ')}; ${result.slowConnects} slow-client connections`;
}

describe('the probe server against slow clients that reconnect when cut', () => {
  it('answers fresh-connection probes within the kubelet timeout, through a mesh or from the node (plain node:http as the baseline)', async () => {
    const health = new HealthCatalog();
    const lifeline = await startProbeServer({ health, port: 0, logger: { warn() {}, info() {}, debug() {} } });
    const underAttack = await probesUnderSlowClients(lifeline.port).finally(async () => {
      await lifeline.close();
      health.close();
    });

    const plain = createServer((_req, res) => res.end('{"status":"pass"}'));
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const baseline = await probesUnderSlowClients((plain.address() as { port: number }).port).finally(() => {
      plain.closeAllConnections();
      plain.close();
    });

    console.log(`${SLOW_CLIENT_COUNT} slow clients reconnecting: lifeline ${said(underAttack)} | plain node:http ${said(baseline)}`);
    // One probe may be lost to a stall of this shared machine (the kubelet acts only after 3 in a row
    // fail). Before this fix none was answered: the slow clients held every slot.
    expect(ok(underAttack)).toBeGreaterThanOrEqual(KUBELET_PROBES - 1);
  }, 30_000);
});

/**
 * Silent clients that reconnect when cut, as in the review that found eviction of the
 * longest-waiting connection turned them into a reconnect storm: 8,000–33,000 connects a second,
 * the listen queue overflowed and the kernel dropped probes' SYNs (the retransmit comes after the
 * kubelet's 1 s timeout). 1,500 clients (the review's 3,000 are in bench/probe-reconnect-storm.ts),
 * a probe every 50 ms for 6 s on a fresh connection each, from 127.0.0.1; the same attack on a plain
 * node:http server, in the same run, is the baseline.
 */
const STORM: StormShape = { clients: 1_500, addresses: 200, ms: 6_000, periodMs: 50, timeoutMs: 1_000 };

describe('the probe server against silent clients that reconnect when cut', () => {
  for (const addresses of [200, 1]) {
    it(`answers 99 % of probes within the kubelet timeout, as plain node:http does, with the clients on ${String(addresses)} address(es)`, async () => {
      const shape = { ...STORM, addresses };
      const lifeline = await probesUnderSilentFlood('lifeline', shape);
      const plain = await probesUnderSilentFlood('plain', shape);
      console.log(
        `${String(shape.clients)} silent clients from ${String(addresses)} address(es): ${describeStorm(lifeline)} | ${describeStorm(plain)}`,
      );
      expect(lifeline.answered / lifeline.probes).toBeGreaterThanOrEqual(0.99);
      expect(lifeline.answered).toBeGreaterThanOrEqual(plain.answered);
      // Held rather than cut, they do not come back: before, thousands of connects a second.
      expect(lifeline.connectsPerSecond).toBeLessThan(500);
    }, 60_000);
  }
});

/**
 * One address flooding the overflow, as in the review that found it unfair: 600 silent clients from
 * 127.0.1.1 reconnecting at once when cut, against caps made small (4 slots, 64 overflowing) so
 * that they keep every overflowing connection younger than 300 ms. Probes come from 127.0.0.1,
 * which holds none: before, each was closed at accept (plain node:http would answer it).
 */
const ONE_ADDRESS_FLOOD: StormShape = { clients: 600, addresses: 1, ms: 3_000, periodMs: 50, timeoutMs: 1_000 };

describe('the probe server against one address flooding its overflow', () => {
  it('answers probes from an address holding no overflow: the flooding address gives way', async () => {
    const limits = { maxConnections: 4, maxConnectionsPerAddress: 4, maxOverflowConnections: 64 };
    const result = await probesUnderSilentFlood('lifeline', ONE_ADDRESS_FLOOD, { limits });
    console.log(`${String(ONE_ADDRESS_FLOOD.clients)} silent clients from one address past 4 + 64: ${describeStorm(result)}`);
    // Cut at the rate they are accepted (thousands a second: 600 clients, room for 68), they crowd
    // the listen queue, where the kernel may drop a probe's SYN: 55-59 of 60 here (4 CPU burners
    // included), 5 of 60 before.
    expect(result.answered).toBeGreaterThanOrEqual(result.probes * 0.8);
  }, 30_000);
});

/**
 * Held sockets are descriptors: under an open-files limit of 512, 800 silent clients (the review:
 * 64 + 4,096 held against ECS's old hard limit of 4,096). The overflow's default follows the limit,
 * so the app can still open files, accept and call out; before, the server held every descriptor.
 */
describe('the probe server under a small open-files limit', () => {
  it('leaves the app descriptors: its default overflow is a quarter of the limit', async () => {
    const shape: StormShape = { clients: 800, addresses: 200, ms: 1_000, periodMs: 50, timeoutMs: 1_000 };
    const result = await probesUnderSilentFlood('lifeline', shape, { openFiles: 512 });
    console.log(
      `800 silent clients, open files 512: ${describeStorm(result)}; the server held ${String(result.files.descriptors)} descriptors, opened ${String(result.files.opened)}/64 files${result.files.error === undefined ? '' : ` (${result.files.error})`}`,
    );
    expect(result.files.opened).toBe(64);
    // 64 slots, 128 overflowing, and the process's own (~30).
    expect(result.files.descriptors).toBeLessThan(64 + 128 + 64);
    // The claim is the descriptors; the probes still pass, but a loaded full run lost 2 of 20 to the
    // listen queue the storm crowds (as the one-address flood above can).
    expect(result.answered).toBeGreaterThanOrEqual(result.probes * 0.9);
  }, 30_000);
});
