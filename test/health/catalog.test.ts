import { afterEach, describe, expect, it, vi } from 'vitest';
import { Diagnostics, Health, HealthCatalog, LifelineError } from '../../src/index.js';
import { useDiagnostics } from '../../src/health/index.js';
import { blockEventLoop, sleep } from '../support/tracing.js';

const catalogs: HealthCatalog[] = [];
function catalog(options?: ConstructorParameters<typeof HealthCatalog>[0]): HealthCatalog {
  const health = new HealthCatalog(options);
  catalogs.push(health);
  return health;
}
afterEach(() => {
  for (const health of catalogs.splice(0)) health.close();
});

describe('HealthCatalog (docs/concepts.md)', () => {
  it('a new catalog is healthy with only healthcheck', () => {
    const health = catalog();
    for (const probe of ['live', 'ready', 'startup'] as const) {
      expect(health.status(probe)).toEqual({ ok: true, healthy: ['healthcheck'], unhealthy: [] });
    }
  });

  it('a registered component starts unhealthy, and stays so until it takes a tick and a round passes', () => {
    const health = catalog();
    const h = health.registerLiveness('poller');
    expect(health.status('live')).toEqual({ ok: false, healthy: ['healthcheck'], unhealthy: ['poller'] });
    health.runRound();
    expect(health.status('live').unhealthy).toEqual(['poller']);
    expect(h.take()).toBeDefined();
    expect(health.status('live').unhealthy).toEqual(['poller']); // verdicts change only at rounds
    health.runRound();
    expect(health.status('live')).toEqual({ ok: true, healthy: ['healthcheck', 'poller'], unhealthy: [] });
  });

  it('ping and take nine times: healthy', () => {
    const health = catalog();
    const h = health.registerLiveness('reader');
    for (let i = 0; i < 9; i++) {
      health.runRound();
      h.take();
    }
    health.runRound();
    expect(health.status('live').healthy).toContain('reader');
  });

  it('ping nine times without taking: unhealthy; taking again makes it healthy', () => {
    const health = catalog();
    const h = health.registerLiveness('lazy');
    for (let i = 0; i < 9; i++) health.runRound();
    expect(health.status('live').unhealthy).toEqual(['lazy']);
    expect(h.take()).toBeDefined();
    health.runRound();
    expect(health.status('live').healthy).toContain('lazy');
  });

  it('a component that stops taking is flagged on the round after its buffer fills', () => {
    const health = catalog({ maxMissedTicks: 2 });
    const h = health.registerLiveness('worker');
    // Drain the registration ticks, then keep up for a while.
    h.take();
    h.take();
    for (let i = 0; i < 3; i++) {
      health.runRound();
      h.take();
    }
    expect(health.status('live').healthy).toContain('worker');
    // Stops taking: round 1 fills slot 1, round 2 fills slot 2, round 3 finds the buffer full.
    health.runRound();
    expect(health.status('live').healthy).toContain('worker');
    health.runRound();
    expect(health.status('live').healthy).toContain('worker');
    health.runRound();
    expect(health.status('live').unhealthy).toEqual(['worker']);
  });

  it('buffers hold `buffer` ticks: take() returns them oldest first, then undefined', () => {
    const health = catalog({ maxMissedTicks: 3, interval: 1_000 });
    const before = Date.now();
    const h = health.registerLiveness('c');
    const ticks = [h.take(), h.take(), h.take()];
    expect(ticks.map((t) => t?.seq)).toEqual([1, 2, 3]);
    expect(h.take()).toBeUndefined();
    for (const tick of ticks) {
      expect(tick?.issuedAt).toBeGreaterThanOrEqual(before);
      expect(tick?.deadline).toBe((tick?.issuedAt ?? 0) + 1_000); // registration ticks: + interval
    }
  });

  it('round ticks have deadline = round time + interval × buffer', () => {
    const health = catalog({ interval: 700, maxMissedTicks: 3 });
    const h = health.registerLiveness('c');
    while (h.take()) {
      // drain registration ticks
    }
    const before = Date.now();
    health.runRound();
    const after = Date.now();
    const tick = h.take();
    expect(tick).toBeDefined();
    expect(tick?.issuedAt).toBeGreaterThanOrEqual(before);
    expect(tick?.issuedAt).toBeLessThanOrEqual(after);
    expect(tick?.deadline).toBe((tick?.issuedAt ?? 0) + 700 * 3);
  });

  it('ready = liveness ∪ readiness with healthcheck once; live = liveness only; startup = startup only, sorted', () => {
    const health = catalog();
    health.registerReadiness('b-forwarder');
    health.registerLiveness('c-listener');
    health.registerLiveness('a-listener');
    health.registerStartup('warmup');
    expect(health.status('live')).toEqual({ ok: false, healthy: ['healthcheck'], unhealthy: ['a-listener', 'c-listener'] });
    expect(health.status('ready')).toEqual({ ok: false, healthy: ['healthcheck'], unhealthy: ['a-listener', 'b-forwarder', 'c-listener'] });
    expect(health.status('startup')).toEqual({ ok: false, healthy: ['healthcheck'], unhealthy: ['warmup'] });
    expect(health.status()).toEqual(health.status('ready'));
  });

  it('once components stop being pinged after their first healthy round and stay healthy', () => {
    const health = catalog();
    const cache = health.registerReadiness('cache', { once: true });
    const warmup = health.registerStartup('warmup');
    cache.take();
    warmup.take();
    health.runRound();
    expect(health.status('ready').healthy).toContain('cache');
    expect(health.status('startup').healthy).toContain('warmup');
    for (let i = 0; i < 10; i++) health.runRound();
    expect(health.status('ready').healthy).toContain('cache');
    expect(health.status('startup').healthy).toContain('warmup');
    // Not pinged any more: only what registration and the first round placed is buffered.
    let taken = 0;
    while (cache.take()) taken++;
    expect(taken).toBe(2);
  });

  it('a non-once component taken off its feet is flagged, a once one is not', () => {
    const health = catalog();
    const plain = health.registerReadiness('plain');
    plain.take();
    health.runRound();
    expect(health.status('ready').healthy).toContain('plain');
    for (let i = 0; i < 3; i++) health.runRound();
    expect(health.status('ready').unhealthy).toContain('plain');
  });

  it('names are unique per catalog', () => {
    const health = catalog();
    health.registerLiveness('dup');
    for (const register of [
      () => health.registerLiveness('dup'),
      () => health.registerReadiness('dup'),
      () => health.registerStartup('dup'),
    ]) {
      expect(register).toThrow(expect.objectContaining({ name: 'LifelineError', code: 'ERR_DUPLICATE_COMPONENT' }));
    }
    // Another catalog is another namespace.
    expect(() => catalog().registerLiveness('dup')).not.toThrow();
  });

  it('a deregistered name can be registered again', () => {
    const health = catalog();
    health.registerLiveness('again').deregister();
    expect(() => health.registerLiveness('again')).not.toThrow();
  });

  it.each([
    [{ interval: 0 }, 'interval', '0'],
    [{ interval: -5 }, 'interval', '-5'],
    [{ interval: Number.NaN }, 'interval', 'NaN'],
    [{ interval: Number.POSITIVE_INFINITY }, 'interval', 'Infinity'],
    [{ interval: '15s' as unknown as number }, 'interval', '"15s"'],
    [{ maxMissedTicks: 0 }, 'maxMissedTicks', '0'],
    [{ maxMissedTicks: 1.5 }, 'maxMissedTicks', '1.5'],
    [{ buffer: 0 }, 'buffer', '0'], // the deprecated name, named as given
  ])('invalid option %o throws ERR_INVALID_OPTION naming %s and its value', (options, option, shown) => {
    let error: unknown;
    try {
      new HealthCatalog(options);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(LifelineError);
    expect(error).toMatchObject({ code: 'ERR_INVALID_OPTION' });
    expect((error as Error).message).toContain(option);
    expect((error as Error).message).toContain(shown);
  });

  it('empty, blank and reserved names are invalid options', () => {
    const health = catalog();
    for (const name of ['', '   ', 'healthcheck', 42 as unknown as string]) {
      expect(() => health.registerLiveness(name)).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('name') }),
      );
    }
  });

  it('deregister removes the component; a second deregister throws ERR_NOT_REGISTERED', () => {
    const health = catalog();
    const h = health.registerLiveness('gone');
    health.registerLiveness('stays');
    h.deregister();
    expect(health.status('live').unhealthy).toEqual(['stays']);
    expect(() => {
      h.deregister();
    }).toThrow(expect.objectContaining({ name: 'LifelineError', code: 'ERR_NOT_REGISTERED' }));
    expect(h.take()).toBeUndefined();
  });

  it('Symbol.dispose deregisters (using)', () => {
    const health = catalog();
    {
      using h = health.registerLiveness('scoped');
      expect(h.name).toBe('scoped');
      expect(health.status('live').unhealthy).toEqual(['scoped']);
    }
    expect(health.status('live')).toEqual({ ok: true, healthy: ['healthcheck'], unhealthy: [] });
  });

  it('healthcheck turns unhealthy when the event loop is blocked past 2 × interval', async () => {
    const health = catalog({ interval: 100 });
    const h = health.registerLiveness('c');
    h.take();
    await sleep(250); // let the timer run a couple of rounds
    expect(health.status('live').healthy).toContain('healthcheck');
    blockEventLoop(450); // no round can run: the timer is starved
    expect(health.status('live').unhealthy).toContain('healthcheck');
    expect(health.status('live').ok).toBe(false);
    await sleep(250); // rounds resume
    expect(health.status('live').healthy).toContain('healthcheck');
  });

  it('the timer runs rounds every interval, starting at the first registration', async () => {
    const health = catalog({ interval: 40 });
    const h = health.registerLiveness('c');
    h.take();
    h.take();
    const tick = await h.next(); // delivered by a timer round, not by hand
    expect(tick?.seq).toBe(3);
    expect(health.status('live').healthy).toContain('c');
  });

  it('next() waits for the next round; close() settles pending next() with undefined', async () => {
    const health = catalog();
    const h = health.registerLiveness('waiter');
    h.take();
    h.take();
    const pending = h.next();
    health.runRound();
    await expect(pending).resolves.toMatchObject({ component: 'waiter', seq: 3 });
    const stuck = h.next();
    health.close();
    await expect(stuck).resolves.toBeUndefined();
    await expect(h.next()).resolves.toBeUndefined();
    health.close(); // idempotent
    expect(() => health.registerLiveness('late')).toThrow(expect.objectContaining({ code: 'ERR_CLOSED' }));
    expect(() => {
      h.deregister();
    }).not.toThrow(); // cleanup after close is harmless
  });

  it('for await yields ticks and ends when the handle is deregistered', async () => {
    const health = catalog();
    const h = health.registerLiveness('loop');
    const seen: number[] = [];
    const loop = (async () => {
      for await (const tick of h) {
        seen.push(tick.seq);
        if (tick.seq === 4) h.deregister();
      }
    })();
    await sleep(0);
    health.runRound();
    await sleep(0);
    health.runRound();
    await loop;
    expect(seen).toEqual([1, 2, 3, 4]);
  });

  it('for await ends when the catalog closes', async () => {
    const health = catalog();
    const h = health.registerReadiness('loop');
    const loop = (async () => {
      let n = 0;
      for await (const _ of h) n++;
      return n;
    })();
    await sleep(0);
    health.close();
    await expect(loop).resolves.toBe(2);
  });

  it('a closed catalog reports its healthcheck unhealthy', () => {
    const health = catalog();
    health.close();
    expect(health.status('live')).toEqual({ ok: false, healthy: [], unhealthy: ['healthcheck'] });
  });

  it('closes the diagnostics it made from options, when it closes and when they are replaced', () => {
    const close = vi.spyOn(Diagnostics.prototype, 'close');
    try {
      catalog({ diagnostics: { minIntervalMs: 1_000 } }).close();
      expect(close).toHaveBeenCalledTimes(1);
      useDiagnostics(catalog(), { minIntervalMs: 1_000 }); // the default ones, made by the catalog
      expect(close).toHaveBeenCalledTimes(2);
    } finally {
      close.mockRestore();
    }
  });

  it('closes only the diagnostics it made: an object it was given is left to whoever made it', () => {
    const given = new Diagnostics({ minIntervalMs: 1_000 });
    const close = vi.spyOn(given, 'close');
    try {
      catalog({ diagnostics: given }).close();
      expect(close).not.toHaveBeenCalled();
      // Replaced (how startLifeline hands over its own): the previous object is not the catalog's either.
      const other = catalog({ diagnostics: given });
      useDiagnostics(other, { minIntervalMs: 1_000 });
      expect(close).not.toHaveBeenCalled();
    } finally {
      given.close();
    }
  });

  it('status() rejects an unknown probe', () => {
    expect(() => catalog().status('alive' as 'live')).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('"alive"') }),
    );
  });
});

describe('names renamed in this version still work, as the CHANGELOG says', () => {
  it('check() runs a round like runRound(): verdicts change only at a round', () => {
    const runs = [
      (h: HealthCatalog) => {
        h.runRound();
      },
      (h: HealthCatalog) => {
        h.check(); // eslint-disable-line @typescript-eslint/no-deprecated -- the alias under test
      },
    ];
    for (const run of runs) {
      const health = catalog({ maxMissedTicks: 1 });
      const component = health.registerLiveness('worker');
      component.take()?.run(() => undefined);
      expect(health.status('live').unhealthy).toContain('worker'); // no round yet
      run(health);
      expect(health.status('live').healthy).toContain('worker');
    }
  });

  it('buffer is read when maxMissedTicks is not given, and is the same number', () => {
    /* eslint-disable @typescript-eslint/no-deprecated -- the alias under test */
    expect(catalog({ buffer: 3 }).maxMissedTicks).toBe(3);
    expect(catalog({ buffer: 3, maxMissedTicks: 5 }).buffer).toBe(5);
    expect(catalog().maxMissedTicks).toBe(2);
    /* eslint-enable @typescript-eslint/no-deprecated */
  });

  it("status() takes Kubernetes' probe names, and still the probe server's short ones", () => {
    const health = catalog();
    const live = health.registerLiveness('poller');
    health.registerReadiness('db');
    live.take();
    health.runRound();
    expect(health.status('liveness')).toEqual({ ok: true, healthy: ['healthcheck', 'poller'], unhealthy: [] });
    expect(health.status('readiness')).toMatchObject({ ok: false, unhealthy: ['db'] });
    expect(health.status('live')).toBe(health.status('liveness'));
    expect(health.status('ready')).toBe(health.status('readiness'));
    expect(health.status()).toBe(health.status('readiness'));
    expect(() => health.status('alive' as 'live')).toThrow(/probe/);
    expect(() => health.status('constructor' as 'live')).toThrow('invalid probe: "constructor"'); // no prototype lookup
  });

  it('Health is HealthCatalog', () => {
    /* eslint-disable @typescript-eslint/no-deprecated -- the alias under test */
    expect(Health).toBe(HealthCatalog);
    const old = new Health({ interval: 1_000 });
    catalogs.push(old);
    expect(old).toBeInstanceOf(HealthCatalog);
    /* eslint-enable @typescript-eslint/no-deprecated */
  });
});
