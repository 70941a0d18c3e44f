import { closeSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { SourceMap, type SourceMapPayload } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** One frame of the blocked thread's JavaScript stack, innermost first. Lines and columns 1-based. */
export interface BlockedFrame {
  /** The function's name as V8 gives it (`crunchReport`), or `''` for an anonymous one. */
  readonly function: string;
  /** A file path for files, else the script URL (`node:internal/…`), or `''` when unknown. */
  readonly file: string;
  /** The line in `file`, 1-based (in the source file when a source map was read). */
  readonly line: number;
  /** The column in that line, 1-based. */
  readonly column: number;
}

/** The inspector's `Debugger.CallFrame`, as much of it as is read here. */
export interface InspectorCallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly location: { readonly scriptId: string; readonly lineNumber: number; readonly columnNumber?: number };
}

/**
 * Frames from the inspector's call frames. An ES module's frames come back with an empty `url`:
 * `scripts` (from `Debugger.scriptParsed`) maps their script ids to it.
 */
export function framesOf(callFrames: readonly InspectorCallFrame[], scripts: ReadonlyMap<string, string>): BlockedFrame[] {
  return callFrames.map((frame) => {
    const url = frame.url !== '' ? frame.url : (scripts.get(frame.location.scriptId) ?? '');
    return {
      function: frame.functionName,
      file: url.startsWith('file://') ? fileURLToPath(url) : url,
      line: frame.location.lineNumber + 1,
      column: (frame.location.columnNumber ?? 0) + 1,
    };
  });
}

/** The frame that explains the block: the innermost one not in Node's own code. */
export function topUserFrame(frames: readonly BlockedFrame[]): BlockedFrame | undefined {
  return frames.find((frame) => frame.file !== '' && !frame.file.startsWith('node:')) ?? frames[0];
}

/** `crunchReport (app.js:8)`: how a person reads a frame. */
export function describeFrame(frame: BlockedFrame): string {
  return `${nameOf(frame)} (${frame.file === '' ? '<unknown>' : frame.file}:${String(frame.line)})`;
}

/** The stack as V8 prints one: a `    at fn (file:line:column)` line per frame. */
export function stackText(frames: readonly BlockedFrame[]): string {
  return frames
    .map(
      (frame) => `    at ${nameOf(frame)} (${frame.file === '' ? '<unknown>' : frame.file}:${String(frame.line)}:${String(frame.column)})`,
    )
    .join('\n');
}

function nameOf(frame: BlockedFrame): string {
  return frame.function === '' ? '<anonymous>' : frame.function;
}

/**
 * The watchdog thread has a small heap (64 MB), and Node's `SourceMap` decodes every mapping at
 * once, ~21 bytes per character of `mappings` (measured on Node 24): a map whose file is over
 * MAX_MAP_BYTES, or whose mappings are over MAX_MAPPINGS (~11 MB decoded), is not read (its frames
 * stay as compiled), and the maps kept hold at most MAX_KEPT_MAPPINGS (~22 MB), oldest dropped first. Scripts above
 * MAX_SCRIPT_BYTES (bundles) are searched for a map file named at their end only.
 */
const MAX_MAP_BYTES = 4 * 1024 * 1024;
const MAX_MAPPINGS = 512 * 1024;
const MAX_KEPT_MAPPINGS = 1024 * 1024;
const MAX_SCRIPT_BYTES = 4 * 1024 * 1024;
const TAIL_BYTES = 4_096;

/**
 * Maps frames of compiled files to their sources through each file's `sourceMappingURL` (inline,
 * or a file beside it), as `--enable-source-maps` maps error stacks. A frame whose file has no
 * readable map, or one too big for this thread, stays as it is. Each file's map is read once.
 */
export class SourceMapper {
  /** Per file: its map and the length of its mappings (what its decoded form costs). */
  readonly #maps = new Map<string, { map: SourceMap; mappings: number } | undefined>();
  #keptMappings = 0;

  map(frames: readonly BlockedFrame[]): BlockedFrame[] {
    return frames.map((frame) => {
      const map = this.#mapOf(frame.file);
      if (map === undefined) return frame;
      const entry = map.findEntry(frame.line - 1, frame.column - 1);
      if (!('originalSource' in entry)) return frame;
      const source = entry.originalSource.startsWith('file://')
        ? fileURLToPath(entry.originalSource)
        : resolve(dirname(frame.file), entry.originalSource);
      return { function: frame.function, file: source, line: entry.originalLine + 1, column: entry.originalColumn + 1 };
    });
  }

  #mapOf(file: string): SourceMap | undefined {
    if (!file.startsWith('/')) return undefined;
    if (this.#maps.has(file)) return this.#maps.get(file)?.map;
    let kept: { map: SourceMap; mappings: number } | undefined;
    try {
      const json = mapJson(file);
      const payload = json === undefined ? undefined : (JSON.parse(json) as SourceMapPayload);
      const mappings = typeof payload?.mappings === 'string' ? payload.mappings.length : 0;
      if (payload !== undefined && mappings <= MAX_MAPPINGS) kept = { map: new SourceMap(payload), mappings };
    } catch {
      kept = undefined; // an unreadable file or map: its frames stay as compiled
    }
    this.#keptMappings += kept?.mappings ?? 0;
    for (const [oldest, entry] of this.#maps) {
      if (this.#keptMappings <= MAX_KEPT_MAPPINGS) break;
      this.#maps.delete(oldest);
      this.#keptMappings -= entry?.mappings ?? 0;
    }
    this.#maps.set(file, kept);
    return kept?.map;
  }
}

/** The JSON of `file`'s source map, if it names one small enough to read. */
function mapJson(file: string): string | undefined {
  const size = statSync(file).size;
  const url = sourceMappingUrl(size <= MAX_SCRIPT_BYTES ? readFileSync(file, 'utf8') : tailOf(file, size));
  if (url === undefined) return undefined;
  const inline = /^data:application\/json;(?:charset=utf-8;)?base64,(.*)$/.exec(url)?.[1];
  if (inline !== undefined) return (inline.length / 4) * 3 <= MAX_MAP_BYTES ? Buffer.from(inline, 'base64').toString('utf8') : undefined;
  const path = resolve(dirname(file), decodeURIComponent(url));
  return statSync(path).size <= MAX_MAP_BYTES ? readFileSync(path, 'utf8') : undefined;
}

function sourceMappingUrl(code: string): string | undefined {
  return /\/\/[#@] sourceMappingURL=(\S+)\s*$/.exec(code)?.[1];
}

function tailOf(file: string, size: number): string {
  const fd = openSync(file, 'r');
  try {
    const tail = Buffer.alloc(Math.min(size, TAIL_BYTES));
    readSync(fd, tail, 0, tail.length, size - tail.length);
    return tail.toString('utf8');
  } finally {
    closeSync(fd);
  }
}
