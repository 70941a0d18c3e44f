import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';

interface FormDataLike {
  readonly [Symbol.toStringTag]: string;
  entries(): IterableIterator<[string, string | Blob]>;
}
type FormDataClass = abstract new () => object;

/**
 * An interceptor that lets a `FormData` body through whichever undici copy the dispatcher belongs to.
 * Each undici copy sends only a `FormData` of its own (another copy's is refused, or sent empty),
 * and which copy made the process's global dispatcher depends on load order: Node's bundled one
 * once an ES module imports `node:http`, else the first `undici` package loaded. lifeline must not
 * change which `FormData` works, so a body that is not `sameCopy`'s is encoded here as undici would
 * (multipart/form-data, streamed, with its length), a form every copy accepts.
 */
export function adoptFormData(sameCopy: FormDataClass | undefined): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) =>
    function dispatchAdoptingFormData(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      const body = opts.body as unknown;
      if (!isFormData(body) || (sameCopy !== undefined && body instanceof sameCopy)) return dispatch(opts, handler);
      const encoded = encodeMultipart(body);
      const headers = flatHeaders(opts.headers);
      if (!hasHeader(headers, 'content-type')) headers.push('content-type', encoded.type);
      if (encoded.length !== undefined && !hasHeader(headers, 'content-length')) headers.push('content-length', String(encoded.length));
      return dispatch({ ...opts, headers, body: encoded.body }, handler);
    };
}

function hasHeader(flat: readonly string[], name: string): boolean {
  for (let i = 0; i < flat.length; i += 2) if (String(flat[i]).toLowerCase() === name) return true;
  return false;
}

function isFormData(body: unknown): body is FormDataLike {
  return (
    body !== null &&
    typeof body === 'object' &&
    (body as Partial<FormDataLike>)[Symbol.toStringTag] === 'FormData' &&
    typeof (body as Partial<FormDataLike>).entries === 'function'
  );
}

const encoder = new TextEncoder();
const CRLF = encoder.encode('\r\n');
const escapeName = (s: string): string => s.replace(/\n/g, '%0A').replace(/\r/g, '%0D').replace(/"/g, '%22');
const crlf = (s: string): string => s.replace(/\r?\n|\r/g, '\r\n');

/** The multipart/form-data encoding of the fetch standard, as undici's `extractBody` does it. */
function encodeMultipart(form: FormDataLike): { body: Readable; type: string; length: number | undefined } {
  const boundary = `----formdata-lifeline-${String(Math.random()).slice(2, 13).padStart(11, '0')}`;
  const prefix = `--${boundary}\r\nContent-Disposition: form-data`;
  const parts: (Uint8Array | Blob)[] = [];
  let length: number | undefined = 0;
  for (const [name, value] of form.entries()) {
    if (typeof value === 'string') {
      parts.push(encoder.encode(`${prefix}; name="${escapeName(crlf(name))}"\r\n\r\n${crlf(value)}\r\n`));
    } else {
      const filename = (value as Partial<File>).name;
      parts.push(
        encoder.encode(
          `${prefix}; name="${escapeName(crlf(name))}"${filename ? `; filename="${escapeName(filename)}"` : ''}\r\n` +
            `Content-Type: ${value.type || 'application/octet-stream'}\r\n\r\n`,
        ),
        value,
        CRLF,
      );
    }
  }
  parts.push(encoder.encode(`--${boundary}--\r\n`));
  for (const part of parts) {
    const size = part instanceof Uint8Array ? part.byteLength : part.size;
    length = length === undefined || typeof size !== 'number' ? undefined : length + size;
  }
  async function* body(): AsyncGenerator<Uint8Array> {
    for (const part of parts) {
      if (part instanceof Uint8Array) yield part;
      else for await (const chunk of part.stream()) yield chunk;
    }
  }
  return { body: Readable.from(body(), { objectMode: false }), type: `multipart/form-data; boundary=${boundary}`, length };
}

/** Dispatch headers in any of undici's forms, as one flat `[name, value, …]` list to add to. */
function flatHeaders(headers: Dispatcher.DispatchOptions['headers']): string[] {
  const flat: string[] = [];
  if (headers === null || headers === undefined) return flat;
  if (Array.isArray(headers)) return [...headers];
  const entries: Iterable<[string, unknown]> =
    typeof (headers as Partial<Iterable<unknown>>)[Symbol.iterator] === 'function'
      ? (headers as Iterable<[string, unknown]>)
      : Object.entries(headers);
  for (const [name, value] of entries) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? (value as unknown[]) : [value]) flat.push(name, String(v));
  }
  return flat;
}
