/**
 * A mysql2 `Pool` under a deadline: `getConnection` waits no longer than its caller's deadline (the
 * waiter leaves the pool's queue) and each waiter is called back in its own caller's context;
 * `query`/`execute` on the pool are bounded as a whole.
 */
import { context, type Context } from '@opentelemetry/api';
import { armDeadline, type RequestAttributes } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import { driver, mysqlAttributes, textOf, type MysqlPool } from './mysql-driver.js';

interface PooledConnection {
  release(): void;
}
type PoolMethod = (this: MysqlPool, ...args: unknown[]) => unknown;

/** A pool's attributes: MariaDB when a connection it made said so. */
function poolAttributes(pool: MysqlPool, text?: unknown): RequestAttributes {
  return mysqlAttributes(pool.config.connectionConfig, pool._allConnections.get(0)?._isMariaDB, text);
}

/** The caller's context (with the deadline a policy gave) of each pool waiter lifeline made, and of mysql2's wrapper of it. */
const waiterContexts = new WeakMap<object, Context>();

export function boundGetConnection(original: PoolMethod): PoolMethod {
  return function getConnection(this: MysqlPool, ...args: unknown[]): unknown {
    const callback = args[0] as ((error: unknown, connection?: PooledConnection) => void) | undefined;
    const rules = driver.policy;
    if (typeof callback !== 'function' || rules === undefined || this._closed) return Reflect.apply(original, this, args);
    // A waiter of ours the pool hands on (a slot freed by a dropped connection) makes its
    // connection in its own caller's context, with its own deadline, not the freer's.
    const owner = waiterContexts.get(callback);
    if (owner !== undefined) return context.with(owner, () => Reflect.apply(original, this, args));
    const active = context.active();
    const deadline = driverDeadline(rules, () => poolAttributes(this), active);
    if (deadline === undefined) {
      // The pool hands a freed connection over in the context of whoever freed it (a stranger's,
      // with its deadline, maybe long passed): the waiter is called back in its own caller's.
      const waiter = context.bind(active, callback);
      waiterContexts.set(waiter, active);
      return Reflect.apply(original, this, [waiter]);
    }
    const bound = runUnderDeadline(deadline, active, () => context.active());
    // An idle connection serves it on the next turn (in this context): no timer to arm.
    if (this._freeConnections.length > 0) return context.with(bound, () => Reflect.apply(original, this, args));
    let settled = false;
    let queued: unknown;
    const waiter = (error: unknown, connection?: PooledConnection): void => {
      if (settled) {
        if (!error) connection?.release(); // handed over after its caller's deadline: back to the pool
        return;
      }
      settled = true;
      timer.cancel();
      // The pool hands a freed connection over in the context of whoever freed it: back to the
      // caller's (a pool's own query on it runs in there and must get its caller's deadline).
      context.with(bound, () => {
        callback(error, connection);
      });
    };
    waiterContexts.set(waiter, bound);
    const timer = armDeadline(
      deadline,
      (pool: MysqlPool) => {
        if (settled) return;
        settled = true;
        // Leave the queue of waiters; a connect under way is cut by its own (the same) deadline.
        const queue = pool._connectionQueue;
        for (let index = 0; index < queue.length; index++) {
          const item = queue.get(index);
          if (item === waiter || (queued !== undefined && item === queued)) {
            queue.removeOne(index);
            break;
          }
        }
        context.with(bound, () => {
          callback(deadlineError(deadline));
        });
      },
      this,
    );
    const waiting = this._connectionQueue.length;
    const result = context.with(bound, () => original.call(this, waiter));
    // mysql2's tracing channel, when subscribed, queues its own wrapper of the waiter.
    if (this._connectionQueue.length > waiting) {
      queued = this._connectionQueue.get(this._connectionQueue.length - 1);
      if (typeof queued === 'object' || typeof queued === 'function') waiterContexts.set(queued as object, bound);
    }
    return result;
  };
}

/** A pool's `query`/`execute`: bounded as a whole, its statement matched by the policy; checkout and query then read that deadline. */
export function boundPoolQuery(original: PoolMethod): PoolMethod {
  return function query(this: MysqlPool, ...args: unknown[]): unknown {
    const rules = driver.policy;
    if (rules === undefined) return Reflect.apply(original, this, args);
    const active = context.active();
    const deadline = driverDeadline(rules, () => poolAttributes(this, textOf(args[0])), active);
    if (deadline === undefined) return Reflect.apply(original, this, args);
    return runUnderDeadline(deadline, active, () => Reflect.apply(original, this, args));
  };
}
