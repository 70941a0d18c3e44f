import { fork } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HealthCatalog, startProbeServer, type Logger } from '../../src/index.js';
import { INSTANCE_ENV, instanceValue, joinHolder, newInstanceKey } from '../../src/probe/index.js';
import { encodeReport, type MemberReport } from '../../src/probe/instance.js';
import { ServiceMembers } from '../../src/probe/members.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
  Reflect.deleteProperty(process.env, INSTANCE_ENV);
});

/** A server on loopback that holds a port the way `handler` says. */
async function holder(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ port: number; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return { port: (server.address() as AddressInfo).port, server };
}

const quiet: Logger = { warn: () => undefined, info: () => undefined, debug: () => undefined };

const healthy = { ok: true, healthy: ['healthcheck'], unhealthy: [] };

/** Joins the holder on `port` as this service instance's member, with the key the environment names. */
function join(port: number, live = () => healthy as ReturnType<HealthCatalog['status']>, staleAfterMs = 60_000, report = true) {
  return joinHolder({ port, host: '127.0.0.1', live, staleAfterMs, everyMs: 60_000, logger: quiet, timeoutMs: 500, report });
}

async function live(port: number): Promise<{ status: number; unhealthy: string[] }> {
  const res = await fetch(`http://127.0.0.1:${String(port)}/live`);
  return { status: res.status, unhealthy: ((await res.json()) as { unhealthy: string[] }).unhealthy };
}

describe('a busy probe port is deferred to only when its holder proves it is this service instance', () => {
  // Before: any JSON whose `healthy` listed `healthcheck` (60 bytes) made a process run without probes.
  it.each([
    [
      'a forged lifeline answer to every path',
      (_req: IncomingMessage, res: ServerResponse) => res.end('{"status":"pass","healthy":["healthcheck"],"unhealthy":[]}'),
    ],
    ['an answer echoing the request', (req: IncomingMessage, res: ServerResponse) => res.end(JSON.stringify({ m: req.url }))],
    ['a 1 MB page', (_req: IncomingMessage, res: ServerResponse) => res.end('x'.repeat(1_000_000))],
    ['headers, then silence', (_req: IncomingMessage, res: ServerResponse) => res.writeHead(200).write('{')],
    [
      'a byte every 100 ms',
      (_req: IncomingMessage, res: ServerResponse) => {
        res.writeHead(200);
        const drip = setInterval(() => res.write(' '), 100);
        res.on('close', () => {
          clearInterval(drip);
        });
      },
    ],
    ['nothing at all', () => undefined],
  ])('not to %s, and within the time given', async (_what, handler) => {
    const { port } = await holder(handler);
    process.env[INSTANCE_ENV] = instanceValue(1, port, newInstanceKey()); // even with a key inherited
    const started = performance.now();
    expect(await join(port)).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(1_500); // 500 ms asked; a loaded machine may be late
  });

  it('not to a real lifeline probe server of another instance (another key), nor without a key inherited', async () => {
    const health = new HealthCatalog();
    cleanup.push(() => {
      health.close();
    });
    const probes = await startProbeServer({ health, port: 0, host: '127.0.0.1', instanceKey: newInstanceKey() });
    cleanup.push(() => probes.close());
    expect(await join(probes.port)).toBeUndefined(); // no key in the environment
    process.env[INSTANCE_ENV] = instanceValue(1, probes.port, newInstanceKey());
    expect(await join(probes.port)).toBeUndefined();
    const unkeyed = await startProbeServer({ health, port: 0, host: '127.0.0.1' });
    cleanup.push(() => unkeyed.close());
    process.env[INSTANCE_ENV] = instanceValue(1, unkeyed.port, newInstanceKey());
    expect(await join(unkeyed.port)).toBeUndefined();
  });
});

describe("a member's liveness reaches the holder's /live", () => {
  async function keyedHolder() {
    const key = newInstanceKey();
    const health = new HealthCatalog();
    cleanup.push(() => {
      health.close();
    });
    const probes = await startProbeServer({ health, port: 0, host: '127.0.0.1', instanceKey: key });
    cleanup.push(() => probes.close());
    process.env[INSTANCE_ENV] = instanceValue(1, probes.port, key);
    return { key, probes };
  }

  it('an unhealthy member fails /live naming its component and pid; healthy again, /live passes; bye forgets it', async () => {
    const { probes } = await keyedHolder();
    let status: ReturnType<HealthCatalog['status']> = healthy;
    const member = await join(probes.port, () => status);
    expect(member).toBeDefined();
    expect(await live(probes.port)).toEqual({ status: 200, unhealthy: [] });
    // The member's next report: a stuck component.
    status = { ok: false, healthy: [], unhealthy: ['db'] };
    await member?.close(); // a report, then bye: forgotten
    expect((await live(probes.port)).status).toBe(200);
    const again = await join(probes.port, () => status);
    expect(await live(probes.port)).toEqual({ status: 503, unhealthy: [`db@${String(process.pid)}`] });
    status = healthy;
    await again?.close();
    expect(await live(probes.port)).toEqual({ status: 200, unhealthy: [] });
  });

  it('a process the instance ran without a channel to it (a script, a tool) learns the holder is its own but is no member', async () => {
    const { probes } = await keyedHolder();
    const descendant = await join(probes.port, () => ({ ok: false, healthy: [], unhealthy: ['db'] }), 1, false);
    expect(descendant?.reporting).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await live(probes.port)).toEqual({ status: 200, unhealthy: [] });
  });

  it('a member that stops reporting (its loop blocked) fails /live once its reports are stale', async () => {
    const { probes } = await keyedHolder();
    const member = await join(probes.port, () => healthy, 150);
    cleanup.push(() => member?.close());
    expect((await live(probes.port)).status).toBe(200);
    // No report comes (every 60 s): past 150 ms the member counts as stuck.
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        void live(probes.port).then((answer) => {
          if (answer.status !== 503) return;
          expect(answer.unhealthy).toEqual([`healthcheck@${String(process.pid)}`]);
          clearInterval(poll);
          resolve();
        });
      }, 50);
    });
  });
});

describe('ServiceMembers: what a holder takes from a report', () => {
  const key = newInstanceKey();
  const report = (fields: Partial<MemberReport> = {}): string =>
    encodeReport(key, { pid: process.pid, seq: 0, ok: true, unhealthy: [], staleAfterMs: 1_000, ...fields }).query;
  const base = { ok: true, healthy: ['healthcheck'], unhealthy: [] };

  it('refuses a report with another key, a changed field or malformed JSON, alike', () => {
    const members = new ServiceMembers(key);
    const other = encodeReport(newInstanceKey(), { pid: 7, seq: 0, ok: false, unhealthy: ['x'], staleAfterMs: 1 }).query;
    const tampered = report().replace(/m=./, (m) => (m.endsWith('0') ? 'm=1' : 'm=0'));
    for (const query of [other, tampered, '', 'r=&m=', `r=${'A'.repeat(5_000)}&m=00`]) {
      expect(members.receive(query)).toEqual({ code: 400, body: { error: 'bad report' } });
    }
    expect(members.size).toBe(0);
    expect(members.live(base)).toBe(base);
  });

  it('keeps at most 256 members, and forgets one whose process is gone', async () => {
    const members = new ServiceMembers(key);
    for (let pid = 1; pid <= 256; pid++) expect(members.receive(report({ pid })).code).toBe(200);
    expect(members.receive(report({ pid: 257 }))).toEqual({ code: 503, body: { error: 'too many members' } });
    // A real process that has exited: stale, and gone.
    const child = fork('', { execArgv: ['-e', ''] });
    const pid = child.pid as number;
    await new Promise((resolve) => child.once('exit', resolve));
    const few = new ServiceMembers(key);
    cleanup.push(() => {
      few.close();
    });
    few.receive(report({ pid, staleAfterMs: 1 }));
    few.receive(report({ staleAfterMs: 1 })); // this process: alive
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(few.live(base).unhealthy).toEqual([`healthcheck@${String(process.pid)}`]);
    expect(few.size).toBe(1);
  });

  it('forgets a member whose pid now names another process (reused: another start time)', async () => {
    const members = new ServiceMembers(key);
    cleanup.push(() => {
      members.close();
    });
    members.receive(report({ staleAfterMs: 1, started: '1' })); // this pid, but not this process's start
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(members.live(base)).toBe(base);
    expect(members.size).toBe(0);
  });

  it("does not count time the holder itself did not run (a stopped or paused pod) as a member's silence", async () => {
    const members = new ServiceMembers(key);
    cleanup.push(() => {
      members.close();
    });
    members.receive(report({ staleAfterMs: 1_000 }));
    const until = performance.now() + 1_500;
    while (performance.now() < until); // the holder's thread does not run: nor would a member's report be read
    await new Promise((resolve) => setTimeout(resolve, 300)); // its pause sampler runs
    expect(members.live(base)).toBe(base);
    // Silent for longer than the report allows while the holder runs: stuck.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(members.live(base).unhealthy).toEqual([`healthcheck@${String(process.pid)}`]);
  });

  it('hands out the same status object while nothing changes (probe bodies are cached per object)', () => {
    const members = new ServiceMembers(key);
    members.receive(report({ ok: false, unhealthy: ['db'] }));
    const first = members.live(base);
    expect(first.ok).toBe(false);
    expect(members.live(base)).toBe(first);
  });
});
