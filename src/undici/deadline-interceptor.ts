import { context } from '@opentelemetry/api';
import { subscribe } from 'node:diagnostics_channel';
import type { Dispatcher } from 'undici';
import { contextWithDeadline, DeadlineScope } from '../deadline/index.js';
import { Memo } from '../memo/index.js';
import {
  callDeadline,
  callerDeadline,
  deadlineHeader,
  DeadlinePolicy,
  noAttributes,
  type DeadlinePolicyOptions,
  type RequestAttributes,
} from '../policy/index.js';
import { undiciRejects, wrapWithDeadline, type DeadlineHandler, type QueuedAbortHook } from './deadline-handler.js';
import { ownQueuedAbortSymbol } from './own-undici.js';
import { withDeadlineHeader } from './request-headers.js';

/**
 * undici's dispatch option through which a queued request can be cancelled before it has a
 * connection. It is lifeline's own undici's: it works on the Agent lifeline builds the global
 * dispatcher on, not on a dispatcher of another undici copy this interceptor is composed onto (the
 * app's own dispatchers get their copy's symbol: own-dispatchers.ts). Without it, DeadlineHandler
 * still frees the caller at the deadline, only the span ends later.
 */
const kQueuedAbort = ownQueuedAbortSymbol();

type DispatchOptions = Dispatcher.DispatchOptions & { [key: symbol]: unknown };

/**
 * An undici interceptor that aborts every request at the deadline in the OpenTelemetry context
 * (or the policy's, whichever is sooner) — connecting, waiting for headers or streaming the body —
 * with a `DeadlineExceededError`, and sends the deadline as `x-request-timeout-ms` to the hosts of
 * `deadlineHeaderHosts`. A request nothing bounds gets at most `headersTimeoutMs` for a connection
 * and, once it has been sent in full, as long for its response head (unless it set undici's own
 * `headersTimeout`); other requests pass through unbounded, their options copied with lifeline's
 * mark (`DEADLINE_DECIDED`) so that no dispatcher below bounds them either.
 * @example `new Agent().compose(deadlineInterceptor({ defaultTimeoutMs: 10_000 }))`
 */
export function deadlineInterceptor(options: DeadlinePolicyOptions = {}): Dispatcher.DispatcherComposeInterceptor {
  const withDeadline = deadlineDispatch(options, kQueuedAbort);
  return (dispatch) =>
    function dispatchWithDeadline(opts: DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      return withDeadline(dispatch, opts, handler);
    };
}

/**
 * Marks the dispatch options of a request whose deadline lifeline has decided (bounded or not), at
 * the outermost dispatcher it went through: the dispatchers below (an Agent's Pool, its Client, a
 * ProxyAgent's Agent, the Client a Pool hands a queued request to later, in another context) pass
 * it straight through, so a request gets one deadline handler, one header and one timer. Options
 * are copied with it (undici copies them with `{ ...opts }`, which keeps symbol keys), never
 * changed: a caller may reuse its options object for the next request. `Symbol.for`, so that
 * another copy of lifeline sees it too.
 */
export const DEADLINE_DECIDED: unique symbol = Symbol.for('lifeline.undici.deadlineDecided') as never;

/** Dispatches one request through `dispatch` under its deadline; see {@link deadlineDispatch}. */
export type DeadlineDispatch = (
  dispatch: Dispatcher.Dispatch,
  opts: Dispatcher.DispatchOptions,
  handler: Dispatcher.DispatchHandler,
) => boolean;

/**
 * The deadline interceptor's work for one undici copy, as a function of the next dispatch: for
 * {@link deadlineInterceptor}, and for dispatchers patched in another undici copy, whose internal
 * queued-abort symbol (`queuedAbort`, undefined where the copy has none) is that copy's own.
 * `adapt` turns a handler of the copy's older API into one of the current API, for a request that
 * gets a deadline (undici 7's own `WrapHandler`); requests without one keep their handler.
 */
export function deadlineDispatch(
  options: DeadlinePolicyOptions,
  queuedAbort: symbol | undefined,
  adapt?: (handler: Dispatcher.DispatchHandler) => Dispatcher.DispatchHandler,
): DeadlineDispatch {
  const policy = new DeadlinePolicy(options);
  if (policy.headersTimeoutMs !== undefined) listenForRequestsSent();
  return function withDeadline(dispatch, given, original) {
    // Options undici would refuse go to undici as they are: the caller gets its error.
    const opts = given as DispatchOptions | null;
    if (opts === null || typeof opts !== 'object' || opts[DEADLINE_DECIDED] === true) return dispatch(given, original);
    const active = context.active();
    const deadline = callDeadline(policy, callerDeadline(active), policy.hasRules ? attributesOf(opts) : noAttributes);
    const dispatchOpts: DispatchOptions = { ...opts, [DEADLINE_DECIDED]: true };
    if (deadline === undefined) return dispatch(dispatchOpts, original);
    const handler = adapt === undefined || !isObject(original) ? original : adapt(original);
    // A handler undici would refuse goes to undici unwrapped: the caller gets its error, not a hang.
    if (undiciRejects(handler, opts)) return dispatch(dispatchOpts, original);
    // The caller chose how long this call waits for its head (0: forever): the default steps aside.
    if (deadline.untilHeaders && opts.headersTimeout != null) return dispatch(dispatchOpts, original);

    const deadlineHandler = wrapWithDeadline(
      handler,
      deadline,
      deadline.untilHeaders ? { deadline, sentAtStart: sentInOneWrite(opts.body) } : undefined,
    );
    const header = deadlineHeader(policy, deadline, hostOfOrigin(opts.origin));
    if (queuedAbort !== undefined) dispatchOpts[queuedAbort] = chainHooks(deadlineHandler.queuedAbortHook, opts[queuedAbort]);
    if (header !== undefined) dispatchOpts.headers = withDeadlineHeader(opts.headers, header, policy.headerNames);
    deadlineHandler.arm();
    const outer = dispatching;
    if (deadline.untilHeaders) dispatching = deadlineHandler;
    try {
      if (!deadline.fromPolicy) return dispatch(dispatchOpts, deadlineHandler);
      // The policy tightened the deadline: let the client span and the propagated header see it.
      const scope = new DeadlineScope(deadline.at, deadline.source, deadline.monotonicAt);
      return context.with(contextWithDeadline(active, scope), dispatch, undefined, dispatchOpts, deadlineHandler);
    } catch (error) {
      deadlineHandler.disarm();
      throw error;
    } finally {
      dispatching = outer;
    }
  };
}

// The thunks the policy asks for, made apart from the dispatch above: a closure in it made every
// request allocate the variables it captures, whether or not the policy called it.
function attributesOf(opts: Dispatcher.DispatchOptions): () => RequestAttributes {
  return () => requestAttributes(opts);
}
function hostOfOrigin(origin: Dispatcher.DispatchOptions['origin']): () => string | undefined {
  return () => hostOf(origin);
}

/**
 * The handler under the headers bound whose dispatch is running: the undici request created
 * synchronously meanwhile (`undici:request:create`) is its, and `undici:request:bodySent` tells it
 * when that request has been sent in full. A request created later (an interceptor below that
 * dispatches asynchronously) is not matched: its handler falls back on the shape of the body.
 */
let dispatching: DeadlineHandler | undefined;
const handlerOf = new WeakMap<object, DeadlineHandler>();
let listening = false;

function listenForRequestsSent(): void {
  if (listening) return;
  listening = true;
  subscribe('undici:request:create', (message) => {
    const handler = dispatching;
    if (handler === undefined) return;
    dispatching = undefined; // one request per dispatch: the first one created
    handlerOf.set((message as { request: object }).request, handler);
    handler.hearsRequestSent();
  });
  subscribe('undici:request:bodySent', (message) => {
    handlerOf.get((message as { request: object }).request)?.requestSent();
  });
}

function isObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null;
}

/** A body undici writes whole when the request starts: none, a string, bytes. */
function sentInOneWrite(body: Dispatcher.DispatchOptions['body']): boolean {
  return body == null || typeof body === 'string' || ArrayBuffer.isView(body) || body instanceof ArrayBuffer;
}

/** An outer layer (e.g. `undici.request` with a signal) may have set its own hook: both get the cancel. */
function chainHooks(ours: QueuedAbortHook, theirs: unknown): QueuedAbortHook {
  if (typeof theirs !== 'function') return ours;
  return (cancel) => {
    ours(cancel);
    (theirs as QueuedAbortHook)(cancel);
  };
}

/** `:` `/` `?` `#`: where the host of an origin ends. */
const HOST_END: ReadonlySet<number> = new Set([0x3a, 0x2f, 0x3f, 0x23]);

const DEFAULT_PORTS: Readonly<Record<string, number>> = { 'http:': 80, 'https:': 443 };

/** Hosts per origin (`''`: none): a service calls the same few origins over and over. */
const hostsOfOrigins = new Memo<string>(256, 255);

/** The host name of a dispatch origin (`'::1'` for `http://[::1]:80`), `undefined` when there is none. */
function hostOf(origin: Dispatcher.DispatchOptions['origin']): string | undefined {
  if (origin === undefined) return undefined;
  if (typeof origin !== 'string') return origin.hostname;
  return hostsOfOrigins.get(origin, originHost) || undefined;
}

function originHost(origin: string): string {
  // An origin is `scheme://host[:port]`.
  const start = origin.indexOf('://') + 3;
  if (start === 2) return '';
  if (origin[start] === '[') {
    const close = origin.indexOf(']', start);
    return close === -1 ? '' : origin.slice(start, close + 1);
  }
  let end = start;
  while (end < origin.length && !HOST_END.has(origin.charCodeAt(end))) end++;
  return origin.slice(start, end);
}

/** The semantic-convention attributes a policy rule can match, from the dispatch options. */
function requestAttributes(opts: Dispatcher.DispatchOptions): RequestAttributes {
  let origin: URL | undefined;
  try {
    origin = opts.origin === undefined ? undefined : new URL(opts.origin);
  } catch {
    origin = undefined;
  }
  const query = opts.path.indexOf('?');
  const attributes: Record<string, string | number> = {
    'http.request.method': opts.method,
    'url.path': query === -1 ? opts.path : opts.path.slice(0, query),
  };
  if (origin !== undefined) {
    attributes['server.address'] = origin.hostname.replace(/^\[|\]$/g, ''); // '::1', as node:http and gRPC give it
    attributes['url.scheme'] = origin.protocol.slice(0, -1);
    const port = origin.port === '' ? DEFAULT_PORTS[origin.protocol] : Number(origin.port);
    if (port !== undefined) attributes['server.port'] = port;
  }
  return attributes;
}
