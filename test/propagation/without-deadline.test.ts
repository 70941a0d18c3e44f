import { context, createContextKey, propagation, trace } from '@opentelemetry/api';
import { EventEmitter, on, once } from 'node:events';
import type * as Http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  contextWithoutDeadline,
  currentDeadline,
  DEADLINE_HEADER,
  HealthCatalog,
  installDeadlineDispatcher,
  installInboundTrust,
  isDeadlineExceeded,
  withDeadline,
  withoutDeadline,
  withTimeout,
  type InstalledDeadlineDispatcher,
  type Installed,
} from 'otel-lifeline';
import { instrumentedHttpServers, listenOn } from '../support/inbound-server.js';

const otel = instrumentedHttpServers();
let http: typeof Http;
let trust: Installed;
let dispatcher: InstalledDeadlineDispatcher;
const servers: Http.Server[] = [];

beforeAll(() => {
  http = otel.start();
  trust = installInboundTrust();
  dispatcher = installDeadlineDispatcher(); // every fetch below is bounded by its context's deadline
});
afterAll(async () => {
  dispatcher.uninstall();
  trust.uninstall();
  otel.stop();
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
  await Promise.all(servers.filter((s) => s.listening).map((s) => once(s, 'close')));
});

async function serve(handler: Http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  return (await listenOn(server, '127.0.0.1')) ?? '';
}

const KEY = createContextKey('test.other-value');

describe('withoutDeadline / contextWithoutDeadline', () => {
  it('inside withTimeout: no deadline, the span, baggage and other values stay; returns what fn returns', () => {
    otel.tracer.startActiveSpan('outer', (span) => {
      const bag = propagation.createBaggage({ tenant: { value: 't1' } });
      context.with(propagation.setBaggage(context.active(), bag).setValue(KEY, 'kept'), () => {
        withTimeout(10, () => {
          expect(currentDeadline()?.source).toBe('scope');
          const inside = withoutDeadline(() => ({
            deadline: currentDeadline(),
            traceId: trace.getActiveSpan()?.spanContext().traceId,
            tenant: propagation.getActiveBaggage()?.getEntry('tenant')?.value,
            other: context.active().getValue(KEY),
          }));
          expect(inside).toEqual({ deadline: undefined, traceId: span.spanContext().traceId, tenant: 't1', other: 'kept' });
          expect(currentDeadline()?.source).toBe('scope'); // only the callback was detached
        });
      });
      span.end();
    });
  });

  it('a nested withTimeout inside works normally, even later than the deadline it left', () => {
    withTimeout(10, () => {
      const outer = currentDeadline()?.at ?? 0;
      withoutDeadline(() => {
        withTimeout(60_000, () => {
          expect(currentDeadline()?.source).toBe('scope');
          expect(currentDeadline()?.at).toBeGreaterThan(outer + 50_000);
        });
      });
    });
  });

  it('inside a tick: the tick deadline is gone, the tick trace stays', async () => {
    const health = new HealthCatalog({ interval: 1_000 });
    try {
      const tick = health.registerLiveness('detach').take();
      if (tick === undefined) throw new Error('no tick');
      const seen = await tick.run(async () => {
        const traceId = trace.getActiveSpan()?.spanContext().traceId;
        expect(currentDeadline()?.source).toBe('tick');
        const detached = await withoutDeadline(async () => {
          await Promise.resolve(); // across an await too
          return { deadline: currentDeadline(), traceId: trace.getActiveSpan()?.spanContext().traceId };
        });
        return { ...detached, tickTrace: traceId };
      });
      expect(seen.deadline).toBeUndefined();
      expect(seen.traceId).toBe(seen.tickTrace);
      expect(seen.traceId).toMatch(/^[0-9a-f]{32}$/);
    } finally {
      health.close();
    }
  });

  it('contextWithoutDeadline removes only the deadline; a context without one comes back as is', () => {
    withDeadline(Date.now() + 1_000, () => {
      const ctx = context.active().setValue(KEY, 'kept');
      const detached = contextWithoutDeadline(ctx);
      expect(context.with(detached, () => currentDeadline())).toBeUndefined();
      expect(detached.getValue(KEY)).toBe('kept');
      expect(context.with(ctx, () => currentDeadline())).toBeDefined(); // contexts are immutable
      expect(contextWithoutDeadline(detached)).toBe(detached);
    });
  });

  it('a throw in fn reaches the caller', () => {
    expect(() =>
      withoutDeadline(() => {
        throw new Error('boom');
      }),
    ).toThrow('boom');
  });
});

describe('a background refresher started lazily inside a request with a 1 ms inbound budget', () => {
  /**
   * The service: its first request starts a token refresher, lazily, as apps do. The refresher's
   * loop waits for 'refresh' events (the test sends them: no timers) and fetches an upstream each
   * time. Started with withoutDeadline it owes the request nothing; started plainly (the hazard) it
   * keeps the first caller's 1 ms deadline forever.
   */
  async function service(detach: boolean) {
    const upstream = await serve((_req, res) => res.end('token'));
    const triggers = new EventEmitter();
    const results = new EventEmitter();
    let started = false;
    const refresher = async (): Promise<void> => {
      for await (const _ of on(triggers, 'refresh')) {
        const deadline = currentDeadline();
        const traceId = trace.getActiveSpan()?.spanContext().traceId;
        try {
          const res = await fetch(upstream);
          results.emit('result', { ok: (await res.text()) === 'token', deadline, traceId });
        } catch (error) {
          results.emit('result', { ok: false, exceeded: isDeadlineExceeded(error), deadline, traceId });
        }
      }
    };
    const url = await serve((_req, res) => {
      const inbound = currentDeadline();
      if (!started) {
        started = true;
        void (detach ? withoutDeadline(refresher) : refresher());
      }
      res.setHeader('content-type', 'application/json').end(
        JSON.stringify({
          inboundAt: inbound?.at ?? null,
          source: inbound?.source ?? null,
          traceId: trace.getActiveSpan()?.spanContext().traceId,
        }),
      );
    });
    return { url, triggers, results };
  }

  async function request(url: string) {
    const res = await fetch(url, { headers: { [DEADLINE_HEADER]: '1' } });
    return (await res.json()) as { inboundAt: number | null; source: string | null; traceId: string };
  }

  /** Turns of the event loop until the clock is past `at`: the request's deadline has certainly passed. */
  async function pastDeadline(at: number): Promise<void> {
    while (Date.now() <= at) await new Promise((resolve) => setImmediate(resolve));
  }

  async function refresh(svc: Awaited<ReturnType<typeof service>>) {
    const result = once(svc.results, 'result');
    svc.triggers.emit('refresh');
    const [value] = (await result) as [{ ok: boolean; exceeded?: boolean; deadline: unknown; traceId: string }];
    return value;
  }

  it('run with withoutDeadline, it keeps succeeding after the request ended, in the request trace', async () => {
    const svc = await service(true);
    const first = await request(svc.url);
    expect(first.source).toBe('inbound'); // the caller's 1 ms budget was obeyed by the request itself
    await pastDeadline(first.inboundAt ?? 0);
    for (let i = 0; i < 3; i++) {
      const result = await refresh(svc);
      expect(result).toMatchObject({ ok: true, deadline: undefined, traceId: first.traceId });
    }
  });

  it('started plainly (the hazard), every refresh fails with the first caller deadline', async () => {
    const svc = await service(false);
    const first = await request(svc.url);
    await pastDeadline(first.inboundAt ?? 0);
    for (let i = 0; i < 2; i++) {
      const result = await refresh(svc);
      expect(result).toMatchObject({ ok: false, exceeded: true, deadline: { source: 'inbound' } });
    }
  });
});
