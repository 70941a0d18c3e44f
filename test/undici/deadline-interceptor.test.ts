import { createHook } from 'node:async_hooks';
import { Writable } from 'node:stream';
import * as undici from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  currentDeadline,
  HealthCatalog,
  installDeadlineDispatcher,
  isDeadlineExceeded,
  withDeadline,
  withTimeout,
  type InstalledDeadlineDispatcher,
} from '../../src/index.js';
import { cut, deadlineErrorOf } from '../support/cut.js';
import { answersOk, neverAnswers, serve, stallsBody, tricklesBody, type TestServer } from '../support/servers.js';
import { afterThisTurn } from '../support/turns.js';

type Call = (url: string) => Promise<unknown>;
/** Every client the dispatcher must cover, each consuming the whole body as a caller would. */
const CLIENTS: Record<string, Call> = {
  'global fetch': async (url) => (await fetch(url)).text(),
  'undici.fetch': async (url) => (await undici.fetch(url)).text(),
  'undici.request': async (url) => (await undici.request(url)).body.text(),
  'undici.stream': (url) =>
    undici.stream(
      url,
      { method: 'GET' },
      () =>
        new Writable({
          write: (_chunk, _encoding, done) => {
            done();
          },
        }),
    ),
};

let installed: InstalledDeadlineDispatcher;
const servers: Record<string, TestServer> = {};
beforeAll(async () => {
  installed = installDeadlineDispatcher();
  servers.silent = await serve(neverAnswers);
  servers.stall = await serve(stallsBody);
  servers.trickle = await serve(tricklesBody(20));
  servers.ok = await serve(answersOk);
});
afterAll(async () => {
  installed.uninstall();
  await Promise.all(Object.values(servers).map((s) => s.close()));
});

/** Runs `call` under a deadline `ms` from now (epoch ms, as `withDeadline` takes it). */
const underDeadlineIn = (ms: number) => (fn: () => Promise<unknown>) => withDeadline(Date.now() + ms, fn);

describe.each(Object.entries(CLIENTS))('%s under a deadline (docs/deadlines.md)', (_name, call) => {
  it.each([
    ['waiting for headers', 'silent'],
    ['with the body stalled after the headers', 'stall'],
    ['while the body trickles past the deadline', 'trickle'],
  ])('aborts %s, at the deadline, with a deadline error', async (_phase, server) => {
    // The server would never finish: only the deadline can end the call, and `cut` fails if it does not.
    const { error, at, afterDeadlineMs } = await cut(underDeadlineIn(150), () => call(`${servers[server]?.url ?? ''}/slow`));
    expect(isDeadlineExceeded(error)).toBe(true);
    expect(deadlineErrorOf(error)?.deadline).toBe(at); // this call's deadline, not some other timeout
    expect(afterDeadlineMs).toBeGreaterThanOrEqual(0); // never before it
  });

  it('rejects at once when the deadline passed before the call', async () => {
    const seen = servers.ok?.requests() ?? 0;
    const { error, at } = await cut(underDeadlineIn(-50), () => call(`${servers.ok?.url ?? ''}/late`));
    expect(isDeadlineExceeded(error)).toBe(true);
    expect(deadlineErrorOf(error)?.deadline).toBe(at);
    // At once: before the request reached the server, which would have answered it at once.
    expect(servers.ok?.requests()).toBe(seen);
  });

  it('a passed deadline never lets the request start, even on a kept-alive connection to a fast server', async () => {
    const url = `${servers.ok?.url ?? ''}/warm`;
    await withTimeout(5_000, () => call(url)); // the connection is open and idle now
    const seen = servers.ok?.requests() ?? 0;
    for (let i = 0; i < 20; i++) {
      const { error } = await cut(underDeadlineIn(-1), () => call(url));
      expect(isDeadlineExceeded(error)).toBe(true);
    }
    expect(servers.ok?.requests()).toBe(seen);
  });

  it('leaves a call that finishes first alone', async () => {
    await expect(withTimeout(5_000, () => call(`${servers.ok?.url ?? ''}/fast`))).resolves.not.toThrow();
  });
});

describe('deadline scopes and the dispatcher', () => {
  it('nested scopes: the inner, shorter deadline wins; an outer shorter one is kept', async () => {
    const url = `${servers.silent?.url ?? ''}/nested`;
    // Which deadline ended the call is the one its error names: no clock reading needed.
    const outerAt = Date.now() + 5_000;
    const inner = await cut(
      (fn) => withDeadline(outerAt, () => withTimeout(100, fn)),
      () => fetch(url),
    );
    expect(inner.at).toBeLessThan(outerAt);
    expect(deadlineErrorOf(inner.error)?.deadline).toBe(inner.at);
    expect(inner.afterDeadlineMs).toBeGreaterThanOrEqual(0);
    const shorterOuterAt = Date.now() + 100;
    const outer = await cut(
      (fn) => withDeadline(shorterOuterAt, () => withTimeout(5_000, fn)),
      () => fetch(url),
    );
    expect(outer.at).toBe(shorterOuterAt);
    expect(deadlineErrorOf(outer.error)?.deadline).toBe(shorterOuterAt);
    expect(outer.afterDeadlineMs).toBeGreaterThanOrEqual(0);
  });

  it('concurrent calls with different deadlines each end at their own', async () => {
    const url = `${servers.silent?.url ?? ''}/concurrent`;
    // Each error names its own call's deadline, and none came before it: ended by its own, not a neighbour's.
    const cuts = await Promise.all(
      [400, 100, 250].map((ms) =>
        cut(
          (fn) => withTimeout(ms, fn),
          () => fetch(url),
        ),
      ),
    );
    expect(new Set(cuts.map((c) => c.at)).size).toBe(3);
    for (const { error, at, afterDeadlineMs } of cuts) {
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(deadlineErrorOf(error)?.deadline).toBe(at);
      expect(afterDeadlineMs).toBeGreaterThanOrEqual(0);
    }
  });

  it("a tick's run aborts a call at the tick deadline, with source tick", async () => {
    const health = new HealthCatalog({ interval: 120, maxMissedTicks: 1 });
    try {
      const tick = health.registerLiveness('poller').take();
      if (tick === undefined) throw new Error('no tick');
      const { error, at, afterDeadlineMs } = await cut(
        (fn) => tick.run(fn),
        async () => {
          expect(currentDeadline()?.source).toBe('tick');
          await fetch(`${servers.silent?.url ?? ''}/tick`);
        },
      );
      expect(isDeadlineExceeded(error)).toBe(true);
      expect(at).toBe(tick.deadline);
      expect((error as Error).cause).toMatchObject({ source: 'tick', deadline: tick.deadline });
      expect(afterDeadlineMs).toBeGreaterThanOrEqual(0);
    } finally {
      health.close();
    }
  });

  it('a deadline weeks away arms no overflowing timer (no TimeoutOverflowWarning, the call completes)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      await expect(withTimeout(30 * 86_400_000, () => CLIENTS['undici.request']?.(`${servers.ok?.url ?? ''}/far`))).resolves.toBe('ok');
      await new Promise((resolve) => setTimeout(resolve, 20));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).not.toContain('TimeoutOverflowWarning');
  });

  it('calls without any deadline pass through untouched', async () => {
    expect(await (await fetch(`${servers.ok?.url ?? ''}/free`)).text()).toBe('ok');
  });

  it('requests that finish first leave no deadline timer behind', async () => {
    // Track Timeout resources with our 60 s budget: each must be cleared (destroyed) once its call ends.
    const live = new Set<number>();
    const hook = createHook({
      init(id, type, _trigger, resource) {
        const idle = (resource as { _idleTimeout?: number })._idleTimeout ?? 0;
        if (type === 'Timeout' && idle > 59_000 && idle <= 60_000) live.add(id);
      },
      destroy(id) {
        live.delete(id);
      },
    }).enable();
    let created = 0;
    const probe = createHook({
      init(_id, type, _trigger, resource) {
        const idle = (resource as { _idleTimeout?: number })._idleTimeout ?? 0;
        if (type === 'Timeout' && idle > 59_000 && idle <= 60_000) created++;
      },
    }).enable();
    try {
      for (let i = 0; i < 200; i++) await withTimeout(60_000, () => CLIENTS['undici.request']?.(`${servers.ok?.url ?? ''}/n${i}`));
      await afterThisTurn();
    } finally {
      hook.disable();
      probe.disable();
    }
    expect(created).toBe(200);
    expect(live.size).toBe(0);
  });
});
