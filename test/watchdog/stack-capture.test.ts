import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { activeSpanOf, captureStack, waitChannel, type CaptureParts } from '../../src/watchdog/stack-capture.js';

const root = mkdtempSync(join(tmpdir(), 'lifeline-wchan-'));
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** A thread's /proc directory, with the wait channel and system call the kernel shows. */
function task(name: string, wchan: string, syscall: string): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'wchan'), wchan);
  writeFileSync(join(dir, 'syscall'), `${syscall}\n`);
  return dir;
}

describe('waitChannel: where a thread blocked outside JavaScript waits', () => {
  it('the wait channel and the system call number', () => {
    expect(waitChannel(task('pipe', 'pipe_read', '0 0x12 0x7ffd 0x10000 0 0 0 0x7ffd 0x7f'))).toBe('pipe_read (syscall 0)');
  });

  it('a thread seen running is read five times, 2 ms apart, before it is said to run', () => {
    const dir = task('running', '0', 'running');
    const start = performance.now();
    expect(waitChannel(dir)).toBe('running');
    expect(performance.now() - start).toBeGreaterThanOrEqual(7); // four sleeps of 2 ms
  });

  it('no such thread, or no /proc: nothing', () => {
    expect(waitChannel(join(root, 'gone'))).toBeUndefined();
  });
});

describe("activeSpanOf: the hook's answer, whatever the app left at that global", () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const spanId = '00f067aa0ba902b7';

  it('a trace and span id', () => {
    expect(activeSpanOf(`${traceId}-${spanId}`)).toEqual({ traceId, spanId });
  });

  it.each([
    ['no span (empty)', ''],
    ['not a string', 42],
    ['undefined', undefined],
    ['upper case', `${traceId.toUpperCase()}-${spanId}`],
    ['short trace id', `${traceId.slice(1)}-${spanId}`],
    ['long span id', `${traceId}-${spanId}0`],
    ['no span id', traceId],
  ])('nothing for %s', (_, value) => {
    expect(activeSpanOf(value)).toBeUndefined();
  });
});

describe('captureStack: when the stack is not read', () => {
  const parts = (inspectorOpen: boolean, said: string[]): CaptureParts => ({
    inspectorOpen: () => inspectorOpen,
    sourceMapper: undefined,
    timeoutMs: 1_000,
    runnableFor: () => new Promise(() => undefined),
    log: (message) => said.push(message),
  });

  it('an inspector open on the main thread (a debugger): its breakpoint is left alone', async () => {
    const said: string[] = [];
    const started = captureStack(parts(true, said));
    expect(started.unread).toBe('an inspector is open');
    expect([await started.first, await started.landed]).toEqual([undefined, undefined]);
    expect(said).toEqual([]);
  });

  // Only a worker thread can connect to the main thread: from a main thread it is refused as a
  // Node without the inspector refuses it. (In a worker, this would pause the test runner.)
  it.runIf(isMainThread)('no inspector to connect to: said, and not read', async () => {
    const said: string[] = [];
    const started = captureStack(parts(false, said));
    expect(started.unread).toBe('no inspector');
    expect(await started.first).toBeUndefined();
    expect(said).toEqual([expect.stringMatching(/^lifeline: the event loop is blocked and its stack cannot be read: /)]);
  });
});
