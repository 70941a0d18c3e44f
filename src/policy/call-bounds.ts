import { DeadlineExceededError, DeadlineTimer, monotonicNow, type DeadlineSource, type DeadlineWatch } from '../deadline/index.js';
import { armDeadline, headersBoundAt, type CallDeadline, type CallProgress } from './call-deadline.js';

/** A client's call as its deadline needs it: node:http's `ClientRequest`, a node:http2 client stream. */
export interface BoundableCall {
  /** Ended: by the app, the client, or its deadline. */
  readonly destroyed: boolean;
  /** `'finish'`: the request went out in full (flushed to the socket, END_STREAM sent). */
  once(event: 'finish', listener: () => void): unknown;
  /** `'close'`: the call is over, however it ended. */
  on(event: 'close', listener: () => void): unknown;
}

/** What one client family decides itself at its calls' deadline; the rest is {@link CallBounds}'. */
export interface CallFamily<C> {
  /** Under the headers bound: whether the caller set a timeout of its own for the call; the bound then steps aside. */
  ownTimeout(call: C): boolean;
  /** The headers bound stepped aside for the call's own timeout: forget what was recorded of it. */
  steppedAside?(call: C): void;
  /**
   * Under the headers bound, at the end of the connect phase: whether the call is connected and
   * still sending its request (an upload). Not counted (`headersBoundAt` 'connected'): `'finish'`
   * arms the wait for the head.
   */
  sending(call: C): boolean;
  /** Ends the call with `error` at its deadline; `progress`: how far it had got when its timer was armed. */
  end(call: C, error: DeadlineExceededError, progress: CallProgress): void;
}

/**
 * The deadline lifecycle of the calls of one client family whose call is an emitter (node:http,
 * node:http2): {@link CallBounds.arm} arms its deadline ({@link armDeadline}: the context deadline's
 * shared timer, or one of its own), or ends the call on the next tick when the deadline has
 * passed; under the headers bound the request's `'finish'` re-arms it
 * for the response head and {@link CallBounds.headArrived} clears it; `'close'` cancels it. At the
 * deadline it hands the call to the family's `end`, unless the call ended first or the headers
 * bound does not apply (see {@link CallFamily}). Per call: at most one timer and shared listeners, no
 * closure — this runs on every outgoing call; make one instance per family, at load.
 * @example
 * ```ts
 * const requests = new CallBounds<ClientRequest>({
 *   ownTimeout: (request) => (request.timeout ?? 0) > 0,
 *   sending: (request) => request.socket?.connecting === false,
 *   end: (request, error) => request.destroy(error),
 * });
 * const deadline = callDeadline(policy, callerDeadline(context.active()), attributes);
 * if (deadline !== undefined) requests.arm(request, deadline);
 * // and on the response head:
 * requests.headArrived(request);
 * ```
 */
export class CallBounds<C extends BoundableCall> {
  readonly #expire: (expiry: Expiry<C>) => void;
  readonly #onRequestSent: (this: C) => void;

  constructor(family: CallFamily<C>) {
    // Once per family: the timers and listeners of every call share these.
    const expireCall = (expiry: Expiry<C>): void => {
      expire(family, expiry);
    };
    this.#expire = expireCall;
    this.#onRequestSent = function (this: C) {
      onRequestSent(this as Bound<C>, expireCall);
    };
  }

  /** Bounds `call` by `deadline`; call it as the call is created, before the caller has listeners. */
  arm(call: C, deadline: CallDeadline): void {
    const expiry: Expiry<C> = { call, at: deadline.at, source: deadline.source, progress: 'dispatched' };
    // Already past: ended before the call can go out (a kept-alive socket or session sends it at
    // once, and a 0 ms timer can lose to a fast answer). Not now, inside the call's creation: the
    // caller has no 'error' listener yet.
    if (deadline.monotonicAt <= monotonicNow()) {
      process.nextTick(this.#expire, expiry);
      return;
    }
    const bounded = call as Bound<C>;
    bounded[TIMER] = armDeadline<Expiry<C>>(deadline, this.#expire, expiry);
    if (deadline.untilHeaders) {
      bounded[UNTIL_HEADERS] = deadline;
      call.once('finish', this.#onRequestSent);
    }
    call.on('close', cancelTimer);
  }

  /** The response head of `call` arrived: the headers bound, if it had one, is over. */
  headArrived(call: C): void {
    const bounded = call as Bound<C>;
    if (bounded[UNTIL_HEADERS] === undefined) return;
    bounded[UNTIL_HEADERS] = undefined;
    cancelTimer.call(bounded); // the body, however long, is not bounded
  }
}

const TIMER = Symbol('lifeline.deadlineTimer');
/** The headers bound of a call, while it is in force. */
const UNTIL_HEADERS = Symbol('lifeline.untilHeaders');
type Bound<C> = C & { [TIMER]?: DeadlineWatch | undefined; [UNTIL_HEADERS]?: CallDeadline | undefined };
interface Expiry<C> {
  readonly call: C;
  readonly at: number;
  readonly source: DeadlineSource;
  /** How far the call had got when the timer was armed. */
  readonly progress: CallProgress;
}

/** The headers bound: the request went out in full, its response head is now bounded. */
function onRequestSent<C extends BoundableCall>(call: Bound<C>, expireCall: (expiry: Expiry<C>) => void): void {
  const deadline = call[UNTIL_HEADERS];
  if (deadline === undefined || call.destroyed) return; // the head came first, or the bound stepped aside
  const at = headersBoundAt(deadline, 'sent', Date.now()) ?? deadline.at;
  call[TIMER]?.cancel();
  call[TIMER] = new DeadlineTimer<Expiry<C>>(at, expireCall, { call, at, source: deadline.source, progress: 'sent' });
}

function cancelTimer(this: { [TIMER]?: { cancel(): void } | undefined }): void {
  this[TIMER]?.cancel();
  this[TIMER] = undefined;
}

function expire<C extends BoundableCall>(family: CallFamily<C>, { call, at, source, progress }: Expiry<C>): void {
  const bounded = call as Bound<C>;
  bounded[TIMER] = undefined;
  if (call.destroyed) return; // the app ended it first: its reason stands
  if (bounded[UNTIL_HEADERS] !== undefined) {
    if (family.ownTimeout(call)) {
      // The caller chose how long this call may take.
      bounded[UNTIL_HEADERS] = undefined;
      family.steppedAside?.(call);
      return;
    }
    if (progress === 'dispatched' && family.sending(call)) return;
    bounded[UNTIL_HEADERS] = undefined;
  }
  family.end(call, new DeadlineExceededError(at, source), progress);
}
