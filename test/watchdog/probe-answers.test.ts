import { afterEach, describe, expect, it, vi } from 'vitest';
import type { HealthStatus } from '../../src/health/index.js';
import { EventLoopBlockedError } from '../../src/probe/index.js';
import type { Block } from '../../src/watchdog/block-detector.js';
import type { BlockedFrame } from '../../src/watchdog/frames.js';
import type { FromWatchdog } from '../../src/watchdog/messages.js';
import { blockedStatus, ThreadProbes } from '../../src/watchdog/probe-answers.js';

const SELF = 'healthcheck';
const crunch: BlockedFrame = { function: 'crunchReport', file: '/app/report.js', line: 8, column: 3 };
const internal: BlockedFrame = { function: 'readFileSync', file: 'node:fs', line: 441, column: 20 };
const published: HealthStatus = { ok: true, healthy: ['db', SELF, 'queue'], unhealthy: [] };

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

describe("blockedStatus: a probe answer while the loop is blocked past the catalog's limit", () => {
  it("fails the catalog's own component, says for how long and where, with the five innermost frames", () => {
    const frames = [internal, crunch, ...Array.from({ length: 6 }, (_, i) => ({ ...crunch, function: '', line: 20 + i }))];
    expect(blockedStatus({ ok: false, healthy: ['db', SELF], unhealthy: ['queue'] }, 2_345.6, frames, SELF)).toEqual({
      ok: false,
      healthy: ['db'],
      unhealthy: [SELF, 'queue'],
      eventLoop: {
        blockedMs: 2_346,
        blockedIn: 'crunchReport (/app/report.js:8)',
        frames: [
          'readFileSync (node:fs:441:20)',
          'crunchReport (/app/report.js:8:3)',
          '<anonymous> (/app/report.js:20:3)',
          '<anonymous> (/app/report.js:21:3)',
          '<anonymous> (/app/report.js:22:3)',
        ],
      },
    });
  });

  it('before the stack is captured: only for how long; its component is named once', () => {
    expect(blockedStatus({ ok: false, healthy: [], unhealthy: ['shutdown', SELF] }, 1_000, undefined, SELF)).toEqual({
      ok: false,
      healthy: [],
      unhealthy: [SELF, 'shutdown'],
      eventLoop: { blockedMs: 1_000 },
    });
  });
});

/** Probes on this thread with a block the test sets; the messages they send to the main thread. */
function probes(thresholdMs = 300) {
  const told: FromWatchdog[] = [];
  let block: Block | undefined;
  const thread = new ThreadProbes(
    { thresholdMs, captureTimeoutMs: 1_000, selfComponent: SELF, prepareProbes: false },
    (m) => told.push(m),
    () => block,
  );
  return {
    thread,
    told,
    /** A block of `ownMs` of the loop's own time so far, begun `ms` ago. */
    block: (ownMs: number | undefined, ms = ownMs ?? 0, frames?: BlockedFrame[]): void => {
      block =
        ownMs === undefined
          ? undefined
          : {
              since: performance.now() - ms,
              startedAt: Date.now() - ms,
              report: undefined,
              startup: false,
              starvedMs: ms - ownMs,
              ownMs,
              frames,
            };
    },
  };
}

describe('ThreadProbes: the verdicts published by the main thread, failed by a long block', () => {
  it('answers the published verdicts; fails live and ready only once the block passed both limits, never startup', () => {
    const { thread, block } = probes(300);
    thread.receive({ type: 'status', probe: 'liveness', status: published });
    thread.receive({ type: 'status', probe: 'startup', status: published });
    expect(thread.health.status('readiness')).toEqual({ ok: true, healthy: [], unhealthy: [] }); // nothing published yet
    // Not serving yet: no limit, no failure however long.
    block(60_000);
    expect(thread.failsProbes(60_000)).toBe(false);
    expect(thread.health.status('liveness')).toBe(published);
    // The catalog's stall limit (2 s) is past the threshold: that one counts.
    thread.receive({ type: 'serve', options: { port: 0, host: '127.0.0.1' }, stallAfterMs: 2_000 });
    cleanup.push(() => {
      thread.receive({ type: 'close-probes' });
    });
    expect([thread.failsProbes(1_999), thread.failsProbes(2_000)]).toEqual([false, true]);
    block(1_999, 5_000); // long, but most of it starved of CPU: a restart would not give it any
    expect(thread.health.status('liveness')).toBe(published);
    block(2_000, 2_000, [crunch]);
    expect(thread.health.status('liveness')).toMatchObject({
      ok: false,
      unhealthy: [SELF],
      eventLoop: { blockedIn: 'crunchReport (/app/report.js:8)' },
    });
    expect(thread.health.status('startup')).toBe(published);
    block(undefined);
    expect(thread.health.status('liveness')).toBe(published);
  });

  it('a stall limit under the threshold: the threshold is the limit', () => {
    const { thread } = probes(300);
    thread.receive({ type: 'serve', options: { port: 0, host: '127.0.0.1' }, stallAfterMs: 100 });
    cleanup.push(() => {
      thread.receive({ type: 'close-probes' });
    });
    expect([thread.failsProbes(299), thread.failsProbes(300)]).toEqual([false, true]);
  });

  it('serves them over HTTP: says where it serves, answers 503 with where the loop is stuck, relays its lines, closes on request', async () => {
    const { thread, told, block } = probes(300);
    thread.receive({ type: 'status', probe: 'liveness', status: published });
    thread.receive({ type: 'serve', options: { port: 0, host: '127.0.0.1' }, stallAfterMs: 1_000 });
    await vi.waitFor(() => {
      expect(told.map((m) => m.type)).toContain('serving');
    });
    const serving = told.find((m) => m.type === 'serving');
    const url = serving?.type === 'serving' ? serving.url : '';
    expect(await fetch(`${url}/live`).then((r) => r.status)).toBe(200);
    block(1_500, 1_500, [crunch]);
    const answer = await fetch(`${url}/live`);
    expect(answer.status).toBe(503);
    expect(await answer.json()).toMatchObject({
      status: 'fail',
      unhealthy: [SELF],
      eventLoop: { blockedIn: 'crunchReport (/app/report.js:8)' },
    });
    expect(told).toContainEqual(expect.objectContaining({ type: 'log', level: 'info', msg: 'healthcheck failed' }));
    thread.receive({ type: 'close-probes' });
    await vi.waitFor(() => {
      expect(told.at(-1)).toEqual({ type: 'probes-closed' });
    });
    expect(
      await fetch(`${url}/live`).then(
        () => 'answered',
        () => 'closed',
      ),
    ).toBe('closed');
  });

  it('a port that cannot be served: the failure is told, with its code', async () => {
    const { thread, told } = probes();
    thread.receive({ type: 'serve', options: { port: -1, host: '127.0.0.1' }, stallAfterMs: 1_000 });
    await vi.waitFor(() => {
      expect(told.map((m) => m.type)).toContain('serve-failed');
    });
  });
});

describe('ThreadProbes: diagnostics asked of the main thread', () => {
  it('asks the main thread, and answers with its snapshot or its error', async () => {
    const { thread, told } = probes();
    const first = Promise.resolve(thread.health.diagnose());
    await vi.waitFor(() => {
      expect(told).toEqual([{ type: 'diagnose', id: 0 }]);
    });
    const second = Promise.resolve(thread.health.diagnose());
    await vi.waitFor(() => {
      expect(told).toHaveLength(2);
    });
    const snapshot = { components: [] } as unknown as import('../../src/diagnostics/index.js').DiagnosticSnapshot;
    thread.receive({ type: 'diagnosis', id: 1, error: 'no catalog' });
    thread.receive({ type: 'diagnosis', id: 0, snapshot });
    expect(await first).toBe(snapshot);
    await expect(second).rejects.toThrow('no catalog');
  });

  it('while the loop is blocked: refused at once, without asking', async () => {
    const { thread, told, block } = probes();
    block(0, 2_000);
    await expect(Promise.resolve(thread.health.diagnose())).rejects.toThrow(EventLoopBlockedError);
    expect(told).toEqual([]);
  });

  it('no answer within the capture timeout: the loop is blocked', async () => {
    vi.useFakeTimers();
    const { thread, told } = probes();
    const outcome = Promise.resolve(thread.health.diagnose()).then(
      () => 'answered',
      (err: unknown) => err,
    );
    await vi.waitFor(() => {
      expect(told).toHaveLength(1);
    });
    await vi.advanceTimersByTimeAsync(900);
    let settled = false;
    void outcome.then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(200);
    expect(await outcome).toBeInstanceOf(EventLoopBlockedError);
    // A late answer finds nothing waiting.
    thread.receive({ type: 'diagnosis', id: 0, error: 'late' });
  });
});
