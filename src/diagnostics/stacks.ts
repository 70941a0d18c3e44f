import { fileURLToPath } from 'node:url';

// Frames of lifeline itself, of OpenTelemetry and undici, and of Node's internals say nothing
// about where the user's code is stuck.
const LIFELINE_ROOT = fileURLToPath(new URL('..', import.meta.url));
const NOISE = [LIFELINE_ROOT, '/node_modules/@opentelemetry/', '/node_modules/undici/', 'node:internal/', '(node:', '(<anonymous>)'];
const CAPTURE_DEPTH = 40;
/** Enough to see the call and a few callers; beyond that a dump shows framework plumbing. */
const MAX_USER_FRAMES = 12;

/** A creation stack captured cheaply: V8 formats it only when `.stack` is first read. */
export interface CapturedStack {
  stack?: string;
}

/** Captures the current stack, deep enough to reach the user's frames through undici's. */
export function captureStack(): CapturedStack {
  const holder: CapturedStack = {};
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = CAPTURE_DEPTH;
  Error.captureStackTrace(holder, captureStack);
  Error.stackTraceLimit = limit;
  return holder;
}

/** The frames of a captured stack that belong to the user's code (async frames included). */
export function userFrames(captured: CapturedStack | undefined): string[] {
  const text = captured?.stack;
  if (text === undefined) return [];
  const frames: string[] = [];
  for (const line of text.split('\n')) {
    const frame = line.trim();
    if (!frame.startsWith('at ')) continue;
    if (NOISE.some((noise) => frame.includes(noise))) continue;
    frames.push(frame);
    if (frames.length === MAX_USER_FRAMES) break;
  }
  return frames;
}
