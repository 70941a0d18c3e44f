import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import { DeadlineExceededError, DeadlineTimer, monotonicNow, type DeadlineSource, type DeadlineWatch } from '../deadline/index.js';
import { armDeadline, headersBoundAt, type CallDeadline } from '../policy/index.js';

type Controller = Dispatcher.DispatchController;
type Handler = Dispatcher.DispatchHandler;
type Callback = (this: DeadlineHandler, ...args: never[]) => unknown;

/** Hands a handler, at dispatch, a way to take its request out of a dispatcher's queue. */
export type QueuedAbortHook = (cancel: (reason: Error) => void) => void;

/** The headers bound of one request (`untilHeaders`), as its handler applies it. */
export interface HeadersBound {
  readonly deadline: CallDeadline;
  /**
   * The request goes out in one write when it starts (no body, a string, a Buffer): started is
   * sent, when nothing tells the handler that it was.
   */
  readonly sentAtStart: boolean;
}

/**
 * Aborts one request at its deadline, in whatever phase it is:
 * - waiting for a connection (queued or connecting): undici has not called `onRequestStart`, so
 *   there is no controller yet. The request is taken out of the queue through the dispatcher's
 *   queued-abort hook; a dispatcher without that hook gets the error reported to the caller at
 *   once, and the request aborted as soon as it starts. A timer started at `onRequestStart` would
 *   let a blackholed connect hang for the connect timeout instead.
 * - waiting for headers or streaming the body: through the controller.
 * The timer is cleared when the request ends, so a request that finishes first leaves nothing behind.
 *
 * The headers bound ({@link HeadersBound}, `headersBoundAt`) runs from dispatch until the request
 * starts (it has a connection), stops while the request is sent, and runs again from
 * {@link DeadlineHandler.requestSent} until the response head. Told of the request sent by the
 * handler's own `onRequestSent`, or by undici's `undici:request:bodySent` channel (the interceptor
 * matches the request); told by neither, a request that goes out in one write counts as sent when it
 * starts, and one with a streamed body is no longer bounded once it starts (undici cannot tell this
 * handler when that body is sent, and the bound must not cut an upload).
 *
 * It must be invisible to the caller: undici and its users look at which callbacks a handler has
 * (the mock agent takes another path when `onBodySent` exists), so {@link wrapWithDeadline} gives
 * each wrapper exactly the callbacks of the handler it wraps, every one passed on, including
 * callbacks undici adds after this was written.
 */
export abstract class DeadlineHandler {
  readonly #inner: Handler;
  /** The deadline the request was dispatched under; the headers bound moves `#at` on from it. */
  readonly #deadline: CallDeadline;
  #at: number;
  readonly #source: DeadlineSource;
  /** The headers bound, while it is in force: the response head ends it. */
  #headersBound: HeadersBound | undefined;
  /** Something will call `requestSent` when the request has been sent in full. */
  #hearsSent: boolean;
  #sent = false;
  #timer: DeadlineWatch | undefined;
  #controller: Controller | undefined;
  #cancelQueued: ((reason: Error) => void) | undefined;
  #expired: DeadlineExceededError | undefined;
  /** The caller was already told about the deadline: swallow whatever undici reports later. */
  #reported = false;

  constructor(inner: Handler, deadline: CallDeadline, headersBound: HeadersBound | undefined) {
    this.#inner = inner;
    this.#deadline = deadline;
    this.#at = deadline.at;
    this.#source = deadline.source;
    this.#headersBound = headersBound;
    this.#hearsSent = typeof (inner as { onRequestSent?: unknown }).onRequestSent === 'function';
  }

  /** The interceptor matched the undici request of this handler: `requestSent` will be called. */
  hearsRequestSent(): void {
    this.#hearsSent = true;
  }

  /** The request has been sent in full: the headers bound now runs until the response head. */
  requestSent(): void {
    const bound = this.#headersBound;
    if (bound === undefined || this.#sent || this.#reported || this.#expired !== undefined) return;
    this.#sent = true;
    const at = headersBoundAt(bound.deadline, 'sent', Date.now());
    this.#timer?.cancel();
    this.#timer = undefined;
    if (at === undefined) return;
    this.#at = at; // now + the bound: converted to the monotonic clock now, exactly
    this.#timer = new DeadlineTimer<DeadlineHandler>(at, DeadlineHandler.#onDeadline, this);
  }

  /** The request has a connection and is being sent: the headers bound stops until it is sent. */
  #connected(bound: HeadersBound): void {
    if (this.#sent) return;
    this.#timer?.cancel();
    this.#timer = undefined;
    if (this.#hearsSent) return;
    if (bound.sentAtStart) this.requestSent();
    else this.#headersBound = undefined; // a streamed body: no telling when it is sent, so no bound
  }

  /** Arms the deadline (the context deadline's shared timer, or one of its own); call once, right before dispatching. */
  arm(): void {
    const deadline = this.#deadline;
    // Already past: the request must never start. A 0 ms timer alone can lose to a fast answer on
    // a busy loop (the response is read in the same poll phase), so onRequestStart sees it now.
    if (deadline.monotonicAt <= monotonicNow()) this.#expired = new DeadlineExceededError(this.#at, this.#source);
    this.#timer = armDeadline<DeadlineHandler>(deadline, DeadlineHandler.#onDeadline, this);
  }

  static #onDeadline(handler: DeadlineHandler): void {
    handler.#expire();
  }

  /** The dispatch threw synchronously: the caller already has the error, the timer must go. */
  disarm(): void {
    this.#settle();
    this.#reported = true;
  }

  /** The hook to put in the dispatch options: remembers how to cancel the queued request. */
  readonly queuedAbortHook: QueuedAbortHook = (cancel) => {
    this.#cancelQueued = cancel;
  };

  /** The callbacks with deadline work to do; every other one is passed on as it is. */
  static readonly callbacks: Readonly<Record<string, Callback>> = {
    onRequestStart(this: DeadlineHandler, controller: Controller, context: unknown): void {
      this.#controller = controller;
      this.#cancelQueued = undefined;
      if (this.#expired !== undefined) {
        controller.abort(this.#expired);
        return;
      }
      if (this.#headersBound !== undefined) this.#connected(this.#headersBound);
      this.#inner.onRequestStart?.(controller, context);
    },
    // Only on a wrapper whose handler has it: undici's mock agent takes another path when it exists.
    onRequestSent(this: DeadlineHandler): unknown {
      this.requestSent();
      return this.#reported ? undefined : this.#inner.onRequestSent?.();
    },
    // Once the caller was told about the deadline, nothing undici reports later reaches it.
    onRequestUpgrade(
      this: DeadlineHandler,
      controller: Controller,
      statusCode: number,
      headers: IncomingHttpHeaders,
      socket: Duplex,
    ): void {
      this.#settle();
      if (!this.#reported) this.#inner.onRequestUpgrade?.(controller, statusCode, headers, socket);
    },
    onResponseStart(
      this: DeadlineHandler,
      controller: Controller,
      statusCode: number,
      headers: IncomingHttpHeaders,
      statusMessage?: string,
    ): void {
      if (this.#headersBound !== undefined) {
        this.#headersBound = undefined;
        this.#settle(); // the body, however long, is not bounded
      }
      if (!this.#reported) this.#inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
    },
    onResponseData(this: DeadlineHandler, controller: Controller, chunk: Buffer): void {
      if (!this.#reported) this.#inner.onResponseData?.(controller, chunk);
    },
    onResponseEnd(this: DeadlineHandler, controller: Controller, trailers: IncomingHttpHeaders): void {
      this.#settle();
      if (!this.#reported) this.#inner.onResponseEnd?.(controller, trailers);
    },
    onResponseError(this: DeadlineHandler, controller: Controller, error: Error): void {
      this.#fail(controller, error);
    },
  };

  /** A callback with nothing to do for the deadline: passed on while the caller still listens. */
  static passOn(name: string): Callback {
    return function (this: DeadlineHandler, ...args: never[]): unknown {
      if (this.#reported) return undefined;
      return (this.#inner as Record<string, (...a: never[]) => unknown>)[name]?.(...args);
    };
  }

  #fail(controller: Controller, error: Error): void {
    this.#settle();
    if (this.#reported) return;
    this.#reported = true;
    this.#inner.onResponseError?.(controller, error);
  }

  #expire(): void {
    this.#timer = undefined;
    const error = (this.#expired ??= new DeadlineExceededError(this.#at, this.#source));
    if (this.#controller !== undefined) {
      this.#controller.abort(error);
    } else if (this.#cancelQueued !== undefined) {
      // Fails the request through undici itself (its error channel ends the client span), unless
      // the request is being handed to a connection right now: then onRequestStart aborts it.
      this.#cancelQueued(error);
    } else {
      // A dispatcher without the queued-abort hook: free the caller now, abort once started.
      this.#fail(abortedController(error), error);
    }
  }

  #settle(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#cancelQueued = undefined;
  }
}

type ShapedHandler = DeadlineHandler & Handler;
type ShapedClass = new (inner: Handler, deadline: CallDeadline, headersBound: HeadersBound | undefined) => ShapedHandler;

/** undici's own callbacks, each a bit of the shape key; any other `on*` function is found by a scan. */
const KNOWN = [
  'onRequestStart',
  'onRequestUpgrade',
  'onResponseStarted',
  'onResponseStart',
  'onResponseData',
  'onResponseEnd',
  'onResponseError',
  'onBodySent',
  'onRequestSent',
] as const;
const KNOWN_SET: ReadonlySet<string> = new Set(KNOWN);
const CALLBACK_NAME = /^on[A-Z]/;

const byMask: (ShapedClass | undefined)[] = [];
const byKey = new Map<string, ShapedClass>();
/** Callbacks a class of handlers inherits that lifeline does not know by name (usually none). */
const inheritedExtras = new WeakMap<object, readonly string[]>();

/**
 * Wraps `handler` so that its request ends at `deadline` (`headersBound`: at the headers bound,
 * unless its response head came first). The wrapper has exactly the callbacks the handler has, so
 * undici sees the same handler shape it would without lifeline.
 */
export function wrapWithDeadline(handler: Handler, deadline: CallDeadline, headersBound?: HeadersBound): ShapedHandler {
  let mask = 0;
  for (let i = 0; i < KNOWN.length; i++) {
    if (typeof (handler as Record<string, unknown>)[KNOWN[i] as string] === 'function') mask |= 1 << i;
  }
  const extras = extraCallbacks(handler);
  let Shaped: ShapedClass | undefined;
  if (extras.length === 0) {
    Shaped = byMask[mask] ??= shapedClass(mask, extras);
  } else {
    const key = `${String(mask)},${extras.join(',')}`;
    Shaped = byKey.get(key);
    if (Shaped === undefined) {
      Shaped = shapedClass(mask, extras);
      byKey.set(key, Shaped);
    }
  }
  return new Shaped(handler, deadline, headersBound);
}

function shapedClass(mask: number, extras: readonly string[]): ShapedClass {
  class Shaped extends DeadlineHandler {}
  const names = [...KNOWN.filter((_name, i) => (mask & (1 << i)) !== 0), ...extras];
  for (const name of names) {
    Object.defineProperty(Shaped.prototype, name, {
      value: DeadlineHandler.callbacks[name] ?? DeadlineHandler.passOn(name),
      writable: true,
      configurable: true,
    });
  }
  return Shaped;
}

function extraCallbacks(handler: object): readonly string[] {
  const proto: unknown = Object.getPrototypeOf(handler);
  let extras: readonly string[] = [];
  if (proto !== Object.prototype && proto !== null && typeof proto === 'object') {
    let cached = inheritedExtras.get(proto);
    if (cached === undefined) {
      const found: string[] = [];
      for (let p: unknown = proto; p !== null && p !== Object.prototype && typeof p === 'object'; p = Object.getPrototypeOf(p)) {
        for (const name of Object.getOwnPropertyNames(p)) {
          if (isExtraCallback(handler, name) && !found.includes(name)) found.push(name);
        }
      }
      inheritedExtras.set(proto, found);
      cached = found;
    }
    extras = cached;
  }
  for (const name of Object.keys(handler)) {
    if (isExtraCallback(handler, name) && !extras.includes(name)) extras = [...extras, name];
  }
  return extras;
}

function isExtraCallback(handler: object, name: string): boolean {
  // The set first: most names a handler has are undici's own callbacks (this runs on every call).
  return !KNOWN_SET.has(name) && CALLBACK_NAME.test(name) && typeof (handler as Record<string, unknown>)[name] === 'function';
}

/**
 * Whether undici would refuse this handler (its `assertRequestHandler`): such a handler is left
 * unwrapped, so the caller gets undici's own `UND_ERR_INVALID_ARG` instead of a silent hang.
 */
export function undiciRejects(handler: unknown, opts: { method?: unknown; upgrade?: unknown }): boolean {
  if (handler === null || typeof handler !== 'object') return true;
  const h = handler as Record<string, unknown>;
  if (typeof h.onRequestStart !== 'function' || typeof h.onResponseError !== 'function') return true;
  if (h.onBodySent !== undefined && typeof h.onBodySent !== 'function') return true;
  if (h.onRequestSent !== undefined && typeof h.onRequestSent !== 'function') return true;
  if (opts.upgrade || opts.method === 'CONNECT') return typeof h.onRequestUpgrade !== 'function';
  return typeof h.onResponseStart !== 'function' || typeof h.onResponseData !== 'function' || typeof h.onResponseEnd !== 'function';
}

function abortedController(reason: Error): Controller {
  return {
    aborted: true,
    paused: false,
    reason,
    abort() {
      // already aborted
    },
    pause() {
      // nothing to pause: the request never started
    },
    resume() {
      // nothing to resume
    },
  };
}
