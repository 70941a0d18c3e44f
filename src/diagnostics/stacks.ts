import { fileURLToPath } from 'node:url';

// Frames of lifeline itself, of OpenTelemetry and undici, and of Node's internals say nothing
// about where the user's code is stuck.
const LIFELINE_ROOT = fileURLToPath(new URL('..', import.meta.url));
const NOISE = [LIFELINE_ROOT, '/node_modules/@opentelemetry/', '/node_modules/undici/', 'node:internal/', '(node:', '(<anonymous>)'];
const CAPTURE_DEPTH = 40;
/** Enough to see the call and a few callers; beyond that a dump shows framework plumbing. */
const MAX_USER_FRAMES = 12;
/**
 * A frame names a function and a file: a few hundred characters. A module loaded from a `data:`
 * URL or an `eval` would put its whole source in the frame; cut so one span's stack stays small.
 */
const MAX_FRAME_CHARS = 500;

/** A V8 call site: `toString()` gives its frame line as `.stack` shows it (without `at `). */
interface CallSite extends NodeJS.CallSite {
  toString(): string;
}
type Formatter = (error: Error, sites: CallSite[]) => unknown;
/** `Error`'s formatter hook as it is at run time: a program may set it, or unset it. */
const hooks = Error as { prepareStackTrace?: Formatter | undefined };

/**
 * The user's frames of the current stack, formatted now, one per line (`''` when none are the
 * user's). Formatted at once because an unread stack is not cheap to keep: until `.stack` is read,
 * V8 holds every frame's function and receiver, and with them everything their closures hold, so
 * a span that never ends would keep its caller's buffers alive as long as it is tracked.
 */
export function captureStack(): string {
  const holder: { stack?: unknown } = {};
  const limit = Error.stackTraceLimit;
  const prepare = hooks.prepareStackTrace;
  Error.stackTraceLimit = CAPTURE_DEPTH;
  // Formatting only the frames kept is cheaper than Node's full text. Someone else's formatter (or
  // Node's source maps) maps positions to the user's sources: then theirs, and the text is filtered.
  const ours = isNodesOwn(prepare) && !process.sourceMapsEnabled;
  if (ours) hooks.prepareStackTrace = formatUserFrames;
  try {
    Error.captureStackTrace(holder, captureStack);
    const text = holder.stack; // read here, inside the scope where our formatter is installed
    if (typeof text !== 'string') return '';
    return ours ? text : keepUserFrames(text.split('\n'), lineWhere, (line) => line.trim());
  } finally {
    Error.stackTraceLimit = limit;
    if (ours) hooks.prepareStackTrace = prepare;
  }
}

/** Lifeline's formatter, installed only while it captures: the user's frames as `.stack` shows them. */
const formatUserFrames: Formatter = (_error, sites) => keepUserFrames(sites, siteWhere, (site) => `at ${site.toString()}`);

/** The frames of a stack from {@link captureStack}. */
export function userFrames(stack: string | undefined): string[] {
  return stack === undefined || stack === '' ? [] : stack.split('\n');
}

/** Node 22+ installs its default formatter as `Error.prepareStackTrace`; before, it was unset. */
function isNodesOwn(prepare: Formatter | undefined): boolean {
  return prepare === undefined || prepare.name === 'ErrorPrepareStackTrace';
}

/** Where a frame of a formatted stack runs: the line itself; `undefined` for the message lines. */
function lineWhere(line: string): string | undefined {
  const frame = line.trim();
  return frame.startsWith('at ') ? frame : undefined;
}

/** Where a call site runs, spelled as in its formatted frame, so that one NOISE list judges both. */
function siteWhere(site: CallSite): string {
  return `(${site.getFileName() ?? site.getEvalOrigin() ?? '<anonymous>'})`;
}

/**
 * The first frames that belong to the user's code (async frames included), formatted and joined.
 * Noise is judged on where a frame runs before it is formatted: formatting is the costly part.
 */
function keepUserFrames<T>(frames: Iterable<T>, where: (frame: T) => string | undefined, format: (frame: T) => string): string {
  const kept: string[] = [];
  for (const frame of frames) {
    const at = where(frame);
    if (at === undefined || NOISE.some((noise) => at.includes(noise))) continue;
    const text = format(frame);
    kept.push(text.length > MAX_FRAME_CHARS ? `${text.slice(0, MAX_FRAME_CHARS)}…` : text);
    if (kept.length === MAX_USER_FRAMES) break;
  }
  return kept.join('\n');
}

/** Where a frame line points: `at fn (file:line:column)`, `at file:line:column`, `at async fn (…)`. */
export interface FrameLocation {
  readonly function: string | undefined;
  readonly file: string;
  readonly line: number;
  readonly column: number;
}

const FRAME = /^at (?:async )?(?:(.*?) \()?(.+):(\d+):(\d+)\)?$/;

/** The location of one frame line of {@link captureStack}; `undefined` when it has none (native, eval). */
export function frameLocation(frame: string): FrameLocation | undefined {
  const match = FRAME.exec(frame.trim());
  if (match === null) return undefined;
  const [, fn, file = '', line = '0', column = '0'] = match;
  return {
    function: fn === undefined || fn === '' ? undefined : fn,
    file: file.startsWith('file://') ? fileURLToPath(file) : file,
    line: Number(line),
    column: Number(column),
  };
}
