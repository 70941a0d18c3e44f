import { createRequire } from 'node:module';
import type { Session } from 'node:inspector';
import { fileURLToPath } from 'node:url';
import type { FrameLocation } from './stacks.js';

/** Each function located so far (a handler is located once, whatever the number of its stuck requests). */
const located = new WeakMap<object, FrameLocation | null>();
/** Script ID → URL, as the debugger listed them; listed again when a script is newer than the list. */
let scripts = new Map<string, string>();
const KEY = Symbol.for('otel-lifeline.locate');

/**
 * Where `fn` is defined, from V8 (`[[FunctionLocation]]`, through an in-process inspector session):
 * what names a handler that awaits forever, whose stack no one can capture. `undefined` without
 * an inspector (a Node built without one), for native functions, or on any failure. The first call
 * lists the loaded scripts (milliseconds); later ones are cached per function. Only for exports of
 * stuck work, never per request.
 */
export function locateFunction(fn: (...args: never[]) => unknown): FrameLocation | undefined {
  const known = located.get(fn);
  if (known !== undefined) return known ?? undefined;
  let location: FrameLocation | undefined;
  try {
    location = locate(fn);
  } catch {
    location = undefined; // evidence is best effort: never a throw into an export
  }
  located.set(fn, location ?? null);
  return location;
}

function locate(fn: (...args: never[]) => unknown): FrameLocation | undefined {
  const inspector = createRequire(import.meta.url)('node:inspector') as typeof import('node:inspector');
  const session: Session = new inspector.Session();
  session.connect();
  const holder = globalThis as Record<symbol, unknown>;
  holder[KEY] = fn;
  try {
    // An in-process session answers synchronously: the callbacks have run when `post` returns.
    let where: { scriptId: string; lineNumber: number; columnNumber: number } | undefined;
    session.post(
      'Runtime.evaluate',
      { expression: `globalThis[Symbol.for('otel-lifeline.locate')]`, objectGroup: 'lifeline' },
      (err, found) => {
        if (err !== null) return;
        const objectId = found.result.objectId;
        if (objectId === undefined) return;
        session.post('Runtime.getProperties', { objectId, ownProperties: true }, (failed, properties) => {
          if (failed !== null) return;
          const internal = properties.internalProperties?.find((p) => p.name === '[[FunctionLocation]]');
          where = internal?.value?.value as typeof where;
        });
      },
    );
    session.post('Runtime.releaseObjectGroup', { objectGroup: 'lifeline' });
    if (where === undefined) return undefined;
    if (!scripts.has(where.scriptId)) scripts = listScripts(session);
    const url = scripts.get(where.scriptId);
    if (url === undefined || url === '' || url.startsWith('node:') || url.includes('/node_modules/')) return undefined;
    return {
      function: fn.name === '' ? undefined : fn.name,
      file: url.startsWith('file://') ? fileURLToPath(url) : url,
      line: where.lineNumber + 1,
      column: where.columnNumber + 1,
    };
  } finally {
    Reflect.deleteProperty(holder, KEY);
    session.disconnect();
  }
}

/** The debugger reports every loaded script when enabled; it is disabled again at once. */
function listScripts(session: Session): Map<string, string> {
  const list = new Map<string, string>();
  session.on('Debugger.scriptParsed', (message) => list.set(message.params.scriptId, message.params.url));
  session.post('Debugger.enable');
  session.post('Debugger.disable');
  return list;
}
