import { context } from '@opentelemetry/api';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientHttp2Session, ClientHttp2Stream, Http2Session, OutgoingHttpHeaders } from 'node:http2';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { DeadlineExceededError, markEndedByDeadline } from '../deadline/index.js';
import { whenFirstResolved, wrapMethod } from '../hooks/index.js';
import { Installs, type Installed } from '../install/index.js';
import {
  CallBounds,
  callDeadline,
  callerDeadline,
  deadlineHeader,
  DeadlinePolicy,
  type CallDeadline,
  type DeadlinePolicyOptions,
  type RequestAttributes,
} from '../policy/index.js';

/**
 * Node publishes every stream a client opens here, synchronously inside `session.request()`, in the
 * caller's context, with its headers (already serialized for nghttp2: too late to add one). Streams
 * a server pushes are published here too, from the socket's callback.
 */
const CREATED = 'http2.client.stream.created';
/** …and here when the response head of one has arrived (the body still to come). */
const FINISH = 'http2.client.stream.finish';

/** A request's headers as `session.request()` takes them: an object, or a flat `[name, value, …]` array. */
type RequestHeaders = OutgoingHttpHeaders | readonly string[];

/**
 * Bounds every stream a `node:http2` client opens (`session.request()`, and so got's and
 * http2-wrapper's HTTP/2 requests) by the deadline in the OpenTelemetry context, or the policy's,
 * whichever is sooner — the same rules as node:http and undici. At the deadline the stream is reset
 * (`RST_STREAM` with `NGHTTP2_CANCEL`) and destroyed with a `DeadlineExceededError`, in whatever phase
 * it is: waiting for its session to connect (TCP, TLS), waiting for the response head, or streaming
 * the body. Only the stream ends: its session goes on serving the others — except a session still
 * connecting, which is destroyed (no error, `'close'` only) when the last stream waiting on it is cut.
 * A stream that ends first leaves no timer. A stream nothing bounds gets at most `headersTimeoutMs`
 * to connect and, once its request has been sent in full, as long for its response head, unless it
 * set a timeout of its own (`stream.setTimeout`). The deadline goes to the hosts of
 * `deadlineHeaderHosts` as `x-request-timeout-ms`. gRPC streams (`content-type: application/grpc`)
 * are left to grpc-js and lifeline's gRPC interceptor, and streams a server pushes are not bounded.
 *
 * It listens on Node's `http2.client.stream.created` diagnostics channel. Node serializes a
 * stream's headers before it publishes the stream, so the header is added by wrapping
 * `ClientHttp2Session.prototype.request` (not done when `deadlineHeaderHosts` is `'none'`).
 * OpenTelemetry's http instrumentation makes no spans for HTTP/2. Installing again puts the new
 * options in force until that install is uninstalled ({@link Installed}).
 * @example
 * ```ts
 * installHttp2Deadlines({ defaultTimeoutMs: 30_000 });
 * const session = http2.connect('https://api.example.com');
 * await withTimeout(2_000, async () => {
 *   const stream = session.request({ ':path': '/items' });
 *   await once(stream, 'response'); // rejects with DeadlineExceededError by 2 s
 * });
 * ```
 */
export function installHttp2Deadlines(options: DeadlinePolicyOptions = {}): Installed {
  return installs.add(new DeadlinePolicy(options)); // a bad policy throws before anything changes
}

const installs = new Installs<DeadlinePolicy>((policy) => {
  const header = policy.headerHosts.fixed === false ? undefined : sendDeadlineHeader(policy);
  const onCreated = (message: unknown): void => {
    const { stream, headers } = message as { stream: ClientHttp2Stream; headers?: OutgoingHttpHeaders };
    // A session connected before this install: its later streams carry the header.
    if (stream.session !== undefined) header?.reach(stream.session);
    // A pushed stream (even id: the server's) comes in the context of whoever opened the session.
    if (stream.id !== undefined && stream.id % 2 === 0) return;
    let deadline: CallDeadline | undefined;
    if (handedPolicy === policy) {
      deadline = handedDeadline;
      handedPolicy = undefined;
      handedDeadline = undefined;
    } else {
      if (headers !== undefined && isGrpc(headers)) return;
      deadline = streamDeadline(policy, headers, stream.session);
    }
    bound(stream, deadline);
  };
  subscribe(CREATED, onCreated);
  // Only a headers bound needs to hear of response heads.
  const headersBound = policy.headersTimeoutMs !== undefined;
  if (headersBound) subscribe(FINISH, onResponse);
  return () => {
    unsubscribe(CREATED, onCreated);
    if (headersBound) unsubscribe(FINISH, onResponse);
    header?.undo();
  };
});

function streamDeadline(
  policy: DeadlinePolicy,
  headers: RequestHeaders | undefined,
  session: Http2Session | undefined,
): CallDeadline | undefined {
  return callDeadline(policy, callerDeadline(context.active()), () => streamAttributes(headers, session));
}

/**
 * The deadline the header wrapper worked out for the stream `request()` is creating, handed to the
 * `created` subscriber of the same policy (it runs inside that very call), so both use one deadline.
 */
let handedPolicy: DeadlinePolicy | undefined;
let handedDeadline: CallDeadline | undefined;

type Request = (this: ClientHttp2Session, headers?: RequestHeaders, options?: unknown) => ClientHttp2Stream;

/**
 * Wraps `ClientHttp2Session.prototype.request` to add `x-request-timeout-ms`; returns how to undo it.
 * Node does not export the class: its prototype is reached through the first session the app
 * connects (the wrap of `http2.connect` sees it before the app can make a request on it), or, for a
 * session connected before the install, through its first stream (which goes without the header),
 * so start-up makes no session of its own.
 */
function sendDeadlineHeader(policy: DeadlinePolicy): { reach(session: object): void; undo(): void } {
  let unwrapRequest: (() => void) | undefined;
  let wrapped = false;
  const reachPrototype = (prototype: object): void => {
    if (wrapped) return;
    wrapped = true;
    sessionPrototype = prototype;
    unwrapRequest = wrapRequest(policy, prototype);
  };
  const reach = (session: object): void => {
    reachPrototype(Object.getPrototypeOf(session) as object);
  };
  // Known from an install before this one (this one replaces it): wrapped at once, so the next
  // stream of a session already connected carries the header too.
  if (sessionPrototype !== undefined) reachPrototype(sessionPrototype);
  // node:http2 costs a process ~4 MB and ~15 ms to load (nghttp2, TLS): wrapped when the app loads it, not before.
  let unwrapConnect: (() => void) | undefined;
  let installed = true;
  const stopWaiting = whenFirstResolved(['http2'], () => {
    if (!installed) return;
    unwrapConnect = wrapMethod<Connect>(
      http2(),
      'connect',
      KIND,
      (original) =>
        function (this: unknown, ...args: Parameters<Connect>): ClientHttp2Session {
          const session = Reflect.apply(original, this, args);
          reach(session);
          return session;
        },
    );
    // An ES module's `import { connect } from 'node:http2'` sees the wrap too.
    syncBuiltinESMExports();
  });
  return {
    reach,
    undo() {
      installed = false;
      stopWaiting();
      unwrapConnect?.();
      unwrapRequest?.();
      syncBuiltinESMExports();
    },
  };
}

const KIND = 'lifeline.http2Deadlines';
/** `ClientHttp2Session.prototype`, once an install has reached it (Node does not export the class). */
let sessionPrototype: object | undefined;
type Connect = (...args: unknown[]) => ClientHttp2Session;
let loadedHttp2: typeof import('node:http2') | undefined;
/** node:http2, once the app has it (the wrap of `connect`, a stream to end). */
const http2 = (): typeof import('node:http2') =>
  (loadedHttp2 ??= createRequire(import.meta.url)('node:http2') as typeof import('node:http2'));

function wrapRequest(policy: DeadlinePolicy, prototype: object): (() => void) | undefined {
  return wrapMethod<Request>(
    prototype,
    'request',
    KIND,
    (original) =>
      function (this: ClientHttp2Session, headers?: RequestHeaders, options?: unknown): ClientHttp2Stream {
        // Invalid headers are the original's to reject; gRPC's deadline is grpc-timeout.
        const malformed = headers !== undefined && (typeof headers !== 'object' || (headers as unknown) === null);
        if (malformed || (headers !== undefined && isGrpc(headers))) return original.call(this, headers, options);
        const deadline = streamDeadline(policy, headers, this);
        const header = deadline === undefined ? undefined : deadlineHeader(policy, deadline, () => authorityOf(headers, this)?.host);
        handedPolicy = policy;
        handedDeadline = deadline;
        try {
          return original.call(this, header === undefined ? headers : withHeader(headers, header, policy.headerNames), options);
        } finally {
          handedPolicy = undefined;
          handedDeadline = undefined;
        }
      },
  );
}

function withHeader(headers: RequestHeaders | undefined, value: string, names: readonly string[]): RequestHeaders {
  // A copy: the caller may reuse its headers for the next request. Spreading keeps http2.sensitiveHeaders.
  if (Array.isArray(headers)) return [...(headers as readonly string[]), ...names.flatMap((name) => [name, value])];
  const copy: OutgoingHttpHeaders = { ...(headers as OutgoingHttpHeaders | undefined) };
  for (const name of names) copy[name] = value;
  return copy;
}

/** Streams opened while their session was connecting, by session, until they close. */
const waitingOn = new WeakMap<Http2Session, number>();

function bound(stream: ClientHttp2Stream, deadline: CallDeadline | undefined): void {
  const session = stream.session;
  if (session?.connecting === true) {
    // A session only ever connects once: the count is needed only for streams queued on it now.
    waitingOn.set(session, (waitingOn.get(session) ?? 0) + 1);
    stream.once('close', () => {
      waitingOn.set(session, (waitingOn.get(session) ?? 1) - 1);
    });
  }
  if (deadline === undefined) return;
  streams.arm(stream, deadline);
}

function onResponse(message: unknown): void {
  streams.headArrived((message as { stream: ClientHttp2Stream }).stream);
}

/** The deadline lifecycle of every bounded stream; what is node:http2's own is below. */
const streams = new CallBounds<ClientHttp2Stream>({
  // The caller chose how long this stream may take.
  ownTimeout: (stream) => ((stream as ClientHttp2Stream & { timeout?: number }).timeout ?? 0) > 0,
  // Sent on a connected session, its body still going out (an upload): not counted; 'finish' arms the wait for the head.
  sending: (stream) => !stream.pending && stream.session?.connecting === false,
  end: endStream,
});

function endStream(stream: ClientHttp2Stream, error: DeadlineExceededError): void {
  const session = stream.session;
  markEndedByDeadline(stream);
  // CANCEL, as an aborted fetch resets its stream: destroying with an error alone would send INTERNAL_ERROR.
  stream.close(http2().constants.NGHTTP2_CANCEL); // loaded: a stream of it is here
  stream.destroy(error);
  // A session that never connected held its socket only for the streams waiting on it: with the last one gone, so is it.
  if (session?.connecting === true && !session.destroyed && (waitingOn.get(session) ?? 0) <= 1) session.destroy();
}

function isGrpc(headers: RequestHeaders): boolean {
  return headerValue(headers, 'content-type')?.startsWith('application/grpc') === true;
}

/** A header's value (the first, if several), by its lower-case name, from either form of headers. */
function headerValue(headers: RequestHeaders | undefined, name: string): string | undefined {
  if (headers === undefined) return undefined;
  if (Array.isArray(headers)) {
    const raw = headers as readonly string[];
    for (let i = 0; i + 1 < raw.length; i += 2) if (String(raw[i]).toLowerCase() === name) return String(raw[i + 1]);
    return undefined;
  }
  const object = headers as OutgoingHttpHeaders;
  let value = object[name];
  if (value === undefined)
    for (const key of Object.keys(object))
      if (key.toLowerCase() === name) {
        value = object[key];
        break;
      }
  if (value === undefined) return undefined;
  return String(Array.isArray(value) ? value[0] : value);
}

let authoritySymbol: symbol | undefined | null = null;

/** The authority a session was opened for (`http2.connect`'s URL): Node keeps it on the session only. */
function sessionAuthority(session: Http2Session | undefined): string | undefined {
  if (session === undefined) return undefined;
  authoritySymbol ??= Object.getOwnPropertySymbols(session).find((s) => s.description === 'authority');
  const value = authoritySymbol === undefined ? undefined : (session as unknown as Record<symbol, unknown>)[authoritySymbol];
  return typeof value === 'string' ? value : undefined;
}

/** The server a stream is for: its `:authority` (or `host`), which defaults to the session's. */
function authorityOf(
  headers: RequestHeaders | undefined,
  session: Http2Session | undefined,
): { host: string; port: string | undefined } | undefined {
  const authority = headerValue(headers, ':authority') ?? headerValue(headers, 'host') ?? sessionAuthority(session);
  if (authority === undefined) return undefined;
  const match = /^(?:\[([^\]]*)\]|([^:]*))(?::(\d*))?$/.exec(authority);
  if (match === null) return { host: authority, port: undefined };
  const port = match[3];
  return { host: (match[1] ?? match[2] ?? '').toLowerCase(), port: port === undefined || port === '' ? undefined : port };
}

const DEFAULT_PORTS: Readonly<Record<string, number>> = { http: 80, https: 443 };

/** The semantic-convention attributes a policy rule can match, from the stream's headers. */
function streamAttributes(headers: RequestHeaders | undefined, session: Http2Session | undefined): RequestAttributes {
  const path = headerValue(headers, ':path') ?? '/';
  const query = path.indexOf('?');
  const scheme = headerValue(headers, ':scheme') ?? (session?.encrypted === true ? 'https' : 'http');
  const attributes: Record<string, string | number> = {
    'http.request.method': headerValue(headers, ':method') ?? 'GET',
    'url.path': query === -1 ? path : path.slice(0, query),
    'url.scheme': scheme,
  };
  const authority = authorityOf(headers, session);
  if (authority !== undefined) attributes['server.address'] = authority.host;
  const port = authority?.port === undefined ? DEFAULT_PORTS[scheme] : Number(authority.port);
  if (port !== undefined) attributes['server.port'] = port;
  return attributes;
}
