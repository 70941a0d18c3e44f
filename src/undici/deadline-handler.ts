import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import { DeadlineExceededError, type DeadlineSource } from '../deadline/index.js';

type Controller = Dispatcher.DispatchController;
type Handler = Dispatcher.DispatchHandler;

// setTimeout overflows above 2^31-1 ms and fires at once; longer waits re-arm in steps.
const MAX_TIMER_MS = 2_147_483_647;

/** Hands a handler, at dispatch, a way to take its request out of a dispatcher's queue. */
export type QueuedAbortHook = (cancel: (reason: Error) => void) => void;

/**
 * Wraps one request's handler and aborts the request at its deadline, in whatever phase it is:
 * - waiting for a connection (queued or connecting): undici has not called `onRequestStart`, so
 *   there is no controller yet. The request is taken out of the queue through the dispatcher's
 *   queued-abort hook; a dispatcher without that hook gets the error reported to the caller at
 *   once, and the request aborted as soon as it starts. A timer started at `onRequestStart` would
 *   let a blackholed connect hang for the connect timeout instead.
 * - waiting for headers or streaming the body: through the controller.
 * The timer is cleared when the request ends, so a request that finishes first leaves nothing behind.
 */
export class DeadlineHandler implements Handler {
  readonly #inner: Handler;
  readonly #at: number;
  readonly #source: DeadlineSource;
  #timer: NodeJS.Timeout | undefined;
  #controller: Controller | undefined;
  #cancelQueued: ((reason: Error) => void) | undefined;
  #expired: DeadlineExceededError | undefined;
  /** The caller was already told about the deadline: swallow whatever undici reports later. */
  #reported = false;

  constructor(inner: Handler, at: number, source: DeadlineSource) {
    this.#inner = inner;
    this.#at = at;
    this.#source = source;
  }

  /** Arms the deadline timer; call once, right before dispatching. */
  arm(): void {
    this.#timer = setTimeout(
      () => {
        this.#expire();
      },
      Math.min(MAX_TIMER_MS, Math.max(0, this.#at - Date.now())),
    ).unref();
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

  onRequestStart(controller: Controller, context: unknown): void {
    this.#controller = controller;
    this.#cancelQueued = undefined;
    if (this.#expired !== undefined) {
      controller.abort(this.#expired);
      return;
    }
    this.#inner.onRequestStart?.(controller, context);
  }

  // Once the caller was told about the deadline, nothing undici reports later reaches it.
  onRequestUpgrade(controller: Controller, statusCode: number, headers: IncomingHttpHeaders, socket: Duplex): void {
    this.#settle();
    if (!this.#reported) this.#inner.onRequestUpgrade?.(controller, statusCode, headers, socket);
  }

  onResponseStart(controller: Controller, statusCode: number, headers: IncomingHttpHeaders, statusMessage?: string): void {
    if (!this.#reported) this.#inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (!this.#reported) this.#inner.onResponseData?.(controller, chunk);
  }

  onResponseEnd(controller: Controller, trailers: IncomingHttpHeaders): void {
    this.#settle();
    if (!this.#reported) this.#inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Controller, error: Error): void {
    this.#settle();
    if (this.#reported) return;
    this.#reported = true;
    this.#inner.onResponseError?.(controller, error);
  }

  #expire(): void {
    // A timer can fire a little early; the deadline is a promise about the clock, not the timer.
    const early = this.#at - Date.now();
    if (early > 0) {
      this.#timer = setTimeout(() => {
        this.#expire();
      }, Math.min(MAX_TIMER_MS, early)).unref();
      return;
    }
    this.#timer = undefined;
    const error = new DeadlineExceededError(this.#at, this.#source);
    this.#expired = error;
    if (this.#controller !== undefined) {
      this.#controller.abort(error);
    } else if (this.#cancelQueued !== undefined) {
      // Fails the request through undici itself (its error channel ends the client span), unless
      // the request is being handed to a connection right now: then onRequestStart aborts it.
      this.#cancelQueued(error);
    } else {
      // A dispatcher without the queued-abort hook: free the caller now, abort once started.
      this.onResponseError(abortedController(error), error);
    }
  }

  #settle(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#cancelQueued = undefined;
  }
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
