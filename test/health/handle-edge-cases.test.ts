import { SpanStatusCode, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { DeadlineExceededError, DeadlineSpanProcessor, HealthCatalog, type HealthDiagnostics } from '../../src/index.js';
import { memoryTracing, sleep } from '../support/tracing.js';

const catalogs: HealthCatalog[] = [];
afterEach(() => {
  for (const health of catalogs.splice(0)) health.close();
});
function catalog(options: ConstructorParameters<typeof HealthCatalog>[0] = {}): HealthCatalog {
  const health = new HealthCatalog(options);
  catalogs.push(health);
  return health;
}

describe('ticks and handles under misuse', () => {
  it('a lazy thenable returned from run is executed once', async () => {
    const tick = catalog().registerLiveness('lazy').take();
    let runs = 0;
    const lazy = {
      then(resolve: (v: string) => void) {
        runs++;
        resolve('rows');
      },
    };
    expect(await tick?.run(() => lazy)).toBe('rows');
    expect(runs).toBe(1);
  });

  it('a thrown value that cannot be turned into text still ends the span as ERROR and is rethrown', () => {
    const { provider, spans } = memoryTracing();
    const tick = catalog({ tracerProvider: provider }).registerLiveness('odd').take();
    const odd: unknown = Object.create(null);
    expect(() => {
      tick?.run(() => {
        throw odd;
      });
    }).toThrow();
    expect(spans()[0]?.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('next() calls given up through their signal leave nothing behind and keep no stuck component healthy', async () => {
    const health = catalog();
    const h = health.registerLiveness('racer');
    h.take();
    h.take();
    for (let i = 0; i < 100; i++) {
      const controller = new AbortController();
      await Promise.race([h.next({ signal: controller.signal }), sleep(0)]); // a consumer that gave up
      controller.abort();
    }
    for (let i = 0; i < 3; i++) health.runRound(); // nobody takes: the buffer fills
    expect(health.status('live').unhealthy).toEqual(['racer']);
  });

  it('concurrent next() calls each get a tick of their own, oldest first', async () => {
    const health = catalog();
    const h = health.registerLiveness('pool');
    h.take();
    h.take();
    const first = h.next();
    const second = h.next();
    health.runRound();
    health.runRound();
    const [a, b] = await Promise.all([first, second]);
    expect([a?.seq, b?.seq]).toEqual([3, 4]);
  });

  it('next({ signal }) settles with undefined on abort and takes no tick', async () => {
    const health = catalog();
    const h = health.registerLiveness('aborted');
    h.take();
    h.take();
    const controller = new AbortController();
    const waiting = h.next({ signal: controller.signal });
    controller.abort();
    await expect(waiting).resolves.toBeUndefined();
    health.runRound();
    expect(h.take()?.seq).toBe(3); // the round's tick was buffered, not handed to the aborted call
  });

  it('a diagnostics hook that throws never breaks a round', () => {
    const throwing: HealthDiagnostics = {
      onRound: () => {
        throw new Error('boom');
      },
      snapshot: () => {
        throw new Error('boom');
      },
    };
    const health = catalog({ diagnostics: throwing });
    health.registerLiveness('c');
    expect(() => {
      health.runRound();
    }).not.toThrow();
  });
});

describe('DeadlineSpanProcessor marks any span ended by a recorded deadline error', () => {
  it('uses the exception type the SDK records (the error code)', () => {
    const { provider, spans } = memoryTracing([new DeadlineSpanProcessor()]);
    const span = provider.getTracer('t').startSpan('db query');
    span.recordException(new DeadlineExceededError(Date.now(), 'tick'));
    span.end();
    expect(spans()[0]?.attributes).toMatchObject({ 'error.type': 'timeout', 'lifeline.deadline.exceeded': true });
    expect(trace.getActiveSpan()).toBeUndefined();
  });
});
