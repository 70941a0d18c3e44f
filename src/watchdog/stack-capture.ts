/**
 * Where the blocked main thread is: its JavaScript stack, read by pausing it through the inspector
 * (its frames mapped to their sources when the app runs with source maps), the trace active there,
 * and, for a block outside JavaScript, the kernel's wait channel (Linux).
 */
import { readFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { framesOf, type BlockedFrame, type InspectorCallFrame, type SourceMapper } from './frames.js';

/** What the inspector found: the frames, and the trace active on the main thread then. */
export interface Capture {
  frames: BlockedFrame[];
  active: { traceId: string; spanId: string } | undefined;
}

/** A capture under way. */
export interface CaptureStart {
  /** The capture, when it lands within the capture timeout. */
  readonly first: Promise<Capture | undefined>;
  /** The capture whenever it lands. */
  readonly landed: Promise<Capture | undefined>;
  /** Why the stack is not read, when it is not even tried. */
  readonly unread?: string;
}

export interface CaptureParts {
  /** A debugger is attached to the main thread: its breakpoint must not be released. */
  readonly inspectorOpen: () => boolean;
  /** Set when the app runs with source maps. */
  readonly sourceMapper: SourceMapper | undefined;
  readonly timeoutMs: number;
  /** Resolves once the process could have run for that long (see `BlockDetector.runnableFor`). */
  readonly runnableFor: (ms: number) => Promise<void>;
  readonly log: (message: string) => void;
}

/** Evaluated where the main thread is paused: the hook `startWatchdog` left there. */
export const ACTIVE_SPAN_EXPRESSION = `globalThis[Symbol.for('otel-lifeline.watchdog')]?.activeSpan?.()`;

/**
 * Pauses the main thread through the inspector and reads its frames. `Debugger.enable` and
 * `Debugger.pause` are sent together: a thread blocked in JavaScript handles them at its next
 * interrupt check (within milliseconds, even inside a regular expression or `Atomics.wait`); one
 * blocked in a native call (sync I/O, `execSync`) only once that call returns, and then pauses in
 * its caller. The debugger is enabled only for this.
 */
export function captureStack(parts: CaptureParts): CaptureStart {
  const none = Promise.resolve(undefined);
  // A debugger's breakpoint would be released by the resume below: leave its thread alone.
  if (parts.inspectorOpen()) return { first: none, landed: none, unread: 'an inspector is open' };
  const session = new Session();
  try {
    session.connectToMainThread();
  } catch (err) {
    // No inspector in this build of Node, or it refused: the block is still reported, without frames.
    parts.log(`lifeline: the event loop is blocked and its stack cannot be read: ${String(err)}`);
    return { first: none, landed: none, unread: 'no inspector' };
  }
  const scripts = new Map<string, string>();
  session.on('Debugger.scriptParsed', (message) => {
    if (message.params.url !== '') scripts.set(message.params.scriptId, message.params.url);
  });
  const paused = new Promise<{ callFrames: (InspectorCallFrame & { callFrameId: string })[] }>((resolve) => {
    session.once('Debugger.paused', (message) => {
      resolve(message.params as { callFrames: (InspectorCallFrame & { callFrameId: string })[] });
    });
  });
  session.post('Debugger.enable').catch(() => undefined);
  session.post('Debugger.pause').catch(() => undefined);
  const landed = paused.then(
    async ({ callFrames }) => {
      const frames = framesOf(callFrames, scripts);
      const active = await activeSpan(session, callFrames[0]?.callFrameId, parts.runnableFor);
      await session.post('Debugger.resume').catch(() => undefined);
      await session.post('Debugger.disable').catch(() => undefined);
      session.disconnect();
      return { frames: parts.sourceMapper === undefined ? frames : parts.sourceMapper.map(frames), active };
    },
    () => undefined,
  );
  return { first: Promise.race([landed, parts.runnableFor(parts.timeoutMs).then(() => undefined)]), landed };
}

/** The span active on the main thread where it is paused, read from the hook the main thread left. */
async function activeSpan(
  session: Session,
  callFrameId: string | undefined,
  runnableFor: (ms: number) => Promise<void>,
): Promise<Capture['active']> {
  if (callFrameId === undefined) return undefined;
  try {
    const evaluated = await Promise.race([
      session.post('Debugger.evaluateOnCallFrame', {
        callFrameId,
        expression: ACTIVE_SPAN_EXPRESSION,
        returnByValue: true,
        silent: true,
      }),
      runnableFor(200).then(() => undefined),
    ]);
    return activeSpanOf(evaluated?.result.value);
  } catch {
    return undefined;
  }
}

/** The hook's `traceId-spanId`, when it is one: the app's code may have left anything at a global. */
export function activeSpanOf(value: unknown): Capture['active'] {
  if (typeof value !== 'string') return undefined;
  const [traceId, spanId] = value.split('-');
  return traceId !== undefined && spanId !== undefined && /^[0-9a-f]{32}$/.test(traceId) && /^[0-9a-f]{16}$/.test(spanId)
    ? { traceId, spanId }
    : undefined;
}

/** How often the wait is read again while the main thread is seen running, and how far apart (ms). */
const WAIT_READS = 5;
const WAIT_READ_GAP_MS = 2;
/** Only slept on, between reads. */
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * The main thread's kernel wait channel and system call number (Linux), for a block outside
 * JavaScript. A thread blocked in a system call is seen `running` for the moments the kernel runs
 * it (a pipe read woken by a partial write, a CPU-starved machine catching up): read a few times,
 * ms apart, before saying so. `task`: the thread's `/proc` directory.
 */
export function waitChannel(task = `/proc/${String(process.pid)}/task/${String(process.pid)}`): string | undefined {
  try {
    let seen = 'running';
    for (let read = 0; read < WAIT_READS; read++) {
      if (read > 0) Atomics.wait(pause, 0, 0, WAIT_READ_GAP_MS);
      const channel = readFileSync(`${task}/wchan`, 'utf8').trim();
      const syscall = readFileSync(`${task}/syscall`, 'utf8').trim().split(' ')[0];
      seen = `${channel === '0' || channel === '' ? 'running' : channel}${syscall === undefined || syscall === 'running' ? '' : ` (syscall ${syscall})`}`;
      if (syscall !== undefined && syscall !== 'running') return seen;
    }
    return seen;
  } catch {
    return undefined;
  }
}
