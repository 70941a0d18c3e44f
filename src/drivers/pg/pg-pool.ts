/**
 * pg-pool under a deadline: `Pool#connect` waits no longer than its caller's deadline, each waiter
 * gets its client (and connects) in its own caller's context, and a client whose query a deadline
 * cut goes back to the pool once the server has ended that query (pg-cancel.ts) instead of being dropped.
 */
import { context, type Context } from '@opentelemetry/api';
import { contextWithoutDeadline, isDeadlineExceeded, type DeadlineWatch } from '../../deadline/index.js';
import { armDeadline, noAttributes, type CallDeadline } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import { cutOf } from './pg-cancel.js';
import { driver, pgAttributes, promiseWith, type PgClient, type PgPool } from './pg-driver.js';

interface PooledClient {
  release(error?: unknown): void;
}
type PoolConnect = (this: PgPool, ...args: unknown[]) => unknown;
type NewClient = (this: PgPool, pendingItem: object) => unknown;
type Release = (this: PgPool, client: PgClient, idleListener: unknown, error?: unknown) => unknown;

/**
 * pg-pool removes a client released with an error, and pool.query releases with the query's: a
 * query cut by its deadline would cost the pool a connection and the next caller a new one (a
 * connect, authentication, a backend started), a storm of them when a slow database makes every
 * query miss its deadline. The client goes back to the pool instead, once the server has ended the
 * cut query on it outside a transaction; otherwise it is removed as before. Until then it is
 * neither idle nor free, so no other caller gets it while the server may still run the query. (A
 * client the app checked out and releases itself goes back at once, as always: its next query is
 * held on the connection until the server has ended the cut one.)
 */
export function boundRelease(original: Release): Release {
  return function _release(this: PgPool, client: PgClient, idleListener: unknown, error?: unknown): unknown {
    const cut = cutOf(client);
    // An ending pool removes it anyway; its cancel goes ahead all the same.
    if (cut === undefined || this.ending === true || !isDeadlineExceeded(error)) return original.call(this, client, idleListener, error);
    // A connection dropped meanwhile is not clean; and its error must not go unheard.
    const dropped = (): void => {
      cut.settle(false);
    };
    client.on('error', dropped);
    cut.whenSettled((clean) => {
      client.removeListener('error', dropped);
      original.call(this, client, idleListener, clean ? undefined : error);
    });
    return undefined;
  };
}

/** True while a bounded `Pool#connect` runs: a client it makes at once is made in its caller's context. */
let connecting = false;
/** The caller's context of a waiter a bounded `Pool#connect` queued, on pg-pool's pending item (no WeakMap: one entry per waiting call cost ~5 µs). */
const CALLER = Symbol('lifeline.pg.caller');
type PendingItem = { [CALLER]?: Context };
type PoolCallback = (error: unknown, client?: PooledClient, done?: unknown) => void;

/**
 * pg-pool makes the client for a queued waiter when a slot frees, in the context of whoever freed it:
 * the connect is bounded by the waiter's own deadline, or by none, never by a stranger's.
 */
export function boundNewClient(original: NewClient): NewClient {
  return function newClient(this: PgPool, pendingItem: PendingItem): unknown {
    if (connecting || driver.policy === undefined) return original.call(this, pendingItem);
    const owner = pendingItem[CALLER] ?? contextWithoutDeadline(context.active());
    return context.with(owner, () => original.call(this, pendingItem));
  };
}

export function boundPoolConnect(original: PoolConnect): PoolConnect {
  return function connect(this: PgPool, ...args: unknown[]): unknown {
    const rules = driver.policy;
    if (rules === undefined || this.ending === true) return Reflect.apply(original, this, args);
    const active = context.active();
    const deadline = driverDeadline(
      rules,
      rules.hasRules ? () => pgAttributes(this.options.host, this.options.port, this.options.database) : noAttributes,
      active,
    );
    const pending = this._pendingQueue;
    const waiting = pending?.length ?? 0;
    // An idle client serves this waiter on pg-pool's next pulse: the wait needs no bound (the query will have one).
    const servedAtOnce = (this._idle?.length ?? 0) > waiting;
    if (deadline === undefined || (servedAtOnce && !deadline.fromPolicy && typeof args[0] === 'function')) {
      // pg-pool hands a queued waiter the next freed client in the context of whoever freed it,
      // often a caller whose deadline has passed (a cut query's); it must get its own. (Its pending
      // item is left as it is: pg-pool's connectionTimeoutMillis finds it by its callback.)
      const given = args[0];
      if (typeof given === 'function') args[0] = inContext(active, given as PoolCallback);
      const result = Reflect.apply(original, this, args);
      // Queued: a client pg-pool makes for it later is made in its context too (boundNewClient).
      if (pending !== undefined && pending.length > waiting) (pending[pending.length - 1] as PendingItem)[CALLER] = active;
      return result;
    }
    const callback = args[0] as PoolCallback | undefined;
    let result: Promise<unknown> | undefined;
    let settle: PoolCallback;
    if (callback !== undefined) settle = callback;
    else {
      const { promise, resolve, reject } = promiseWith(this.Promise);
      result = promise;
      settle = (error, client) => {
        if (error) reject(error);
        else resolve(client);
      };
    }
    const wait = new PoolWait(this, deadline, settle, active);
    if (!servedAtOnce) wait.arm();
    const outer = connecting;
    connecting = true;
    try {
      if (deadline.fromPolicy)
        runUnderDeadline(deadline, active, () => {
          wait.caller = context.active();
          return original.call(this, wait.waiter);
        });
      else original.call(this, wait.waiter);
    } finally {
      connecting = outer;
    }
    // The waiter pg-pool queued, if it did (by position: OpenTelemetry's instrumentation wraps the callback).
    if (pending !== undefined && pending.length > waiting) {
      const queued = pending[pending.length - 1] as PendingItem;
      queued[CALLER] = wait.caller;
      wait.queued = queued;
    }
    return result;
  };
}

/** `callback`, called in its caller's context `caller` whoever calls it (a promise's continuation needs nothing: it has its own). */
function inContext(caller: Context, callback: PoolCallback): PoolCallback {
  return (error, client, done) => {
    if (context.active() === caller) callback(error, client, done);
    else context.with(caller, callback, undefined, error, client, done);
  };
}

/** One `Pool#connect` under a deadline: hands its caller a client, or the deadline's error, once. */
class PoolWait {
  readonly #pool: PgPool;
  readonly #deadline: CallDeadline;
  readonly #settle: PoolCallback;
  /** The caller's context, with the deadline in it: where the caller gets its client. */
  caller: Context;
  /** pg-pool's pending item for this waiter, once queued. */
  queued: object | undefined;
  #timer: DeadlineWatch | undefined;
  #settled = false;
  /** What pg-pool calls with a client (or its error). */
  readonly waiter: PoolCallback;

  constructor(pool: PgPool, deadline: CallDeadline, settle: PoolCallback, caller: Context) {
    this.#pool = pool;
    this.#deadline = deadline;
    this.#settle = settle;
    this.caller = caller;
    this.waiter = (error, client, done) => {
      if (this.#settled) {
        client?.release(); // handed over after its caller's deadline: back to the pool for the next waiter
        return;
      }
      this.#settled = true;
      this.#timer?.cancel();
      // pg-pool hands a freed client over in the context of whoever freed it: back to the caller's
      // (pool.query's own client.query runs in there, and must get its caller's deadline, not theirs).
      if (context.active() === this.caller) this.#settle(error, client, done);
      else context.with(this.caller, this.#settle, undefined, error, client, done);
    };
  }

  arm(): void {
    this.#timer = armDeadline<PoolWait>(this.#deadline, PoolWait.#expire, this);
  }

  static #expire(wait: PoolWait): void {
    if (wait.#settled) return;
    wait.#settled = true;
    // Leave the queue of waiters (pg-pool's own connectionTimeoutMillis does the same).
    const queue = wait.#pool._pendingQueue;
    const index = queue === undefined || wait.queued === undefined ? -1 : queue.indexOf(wait.queued as { callback: unknown });
    if (index !== -1) queue?.splice(index, 1);
    wait.#settle(deadlineError(wait.#deadline));
  }
}
