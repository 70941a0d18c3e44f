/**
 * `query` and `execute` on a mysql2 connection under a deadline: the caller is settled once, by the
 * server's answer or by the deadline; a command still queued leaves the queue, one already sent is
 * ended on the server (mysql-kill.ts).
 */
import { context } from '@opentelemetry/api';
import type { DeadlineWatch } from '../../deadline/index.js';
import { armDeadline, type CallDeadline } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import { endsTransaction } from '../sql.js';
import { endOnServer, unhold } from './mysql-kill.js';
import {
  driver,
  mysqlAttributes,
  textOf,
  type Callback,
  type ConnectionMethod,
  type MysqlCommand,
  type MysqlConnection,
  type MysqlCopy,
} from './mysql-driver.js';

/** `query(sql, values?, cb)` and `execute(sql, values?, cb)` on a connection, and `query(command)` (a pool's). */
export function boundQuery(original: ConnectionMethod, copy: MysqlCopy): ConnectionMethod {
  return function query(this: MysqlConnection, ...args: unknown[]): unknown {
    const rules = driver.policy;
    if (rules === undefined) return Reflect.apply(original, this, args);
    const [sql, values, callback] = args;
    const command = sql instanceof copy.Query ? sql : undefined;
    const given = (command !== undefined ? command.onResult : typeof values === 'function' ? values : callback) as Callback | undefined;
    // The event-emitter form (rows as events, `.stream()`): its consumer owns the flow.
    if (typeof given !== 'function') return Reflect.apply(original, this, args);
    const active = context.active();
    const deadline = endsTransaction(textOf(sql))
      ? undefined
      : driverDeadline(rules, () => mysqlAttributes(this.config, this._isMariaDB, textOf(sql)), active);
    // mysql2 calls back in the context of whoever made the connection (its socket's): in the
    // caller's instead, so that a query made from the callback gets its caller's deadline, never a stale one.
    const settle = context.bind(active, given);
    const own = [...args];
    const callWith = (callback: Callback): void => {
      if (command !== undefined) command.onResult = callback;
      else own[typeof values === 'function' ? 1 : 2] = callback;
    };
    if (deadline === undefined) {
      callWith(settle);
      return Reflect.apply(original, this, own);
    }
    const call = new QueryCall(this, deadline, settle, copy);
    callWith(call.callback);
    const made = runUnderDeadline(deadline, active, () => Reflect.apply(original, this, own)) as MysqlCommand;
    call.start(made);
    return made;
  };
}

/** One query under a deadline: settles its caller once, by the server's answer or by the deadline. */
class QueryCall {
  readonly #connection: MysqlConnection;
  readonly #deadline: CallDeadline;
  readonly #settle: Callback;
  readonly #copy: MysqlCopy;
  #command: MysqlCommand | undefined;
  #timer: DeadlineWatch | undefined;
  #settled = false;
  /** Told the killed query's own answer, which its caller never sees. */
  #late: ((error: unknown) => void) | undefined;
  /** The callback mysql2 calls with the server's answer (or its own error). */
  readonly callback: Callback;

  constructor(connection: MysqlConnection, deadline: CallDeadline, settle: Callback, copy: MysqlCopy) {
    this.#connection = connection;
    this.#deadline = deadline;
    this.#settle = settle;
    this.#copy = copy;
    this.callback = (error, ...results) => {
      if (this.#settled) {
        // Ended by its deadline: the kill's error (1317) is ours, not the caller's.
        this.#late?.(error);
        return;
      }
      this.#settled = true;
      this.#timer?.cancel();
      this.#settle(error, ...results);
    };
  }

  /** Arms the deadline for the command mysql2 made (queued, or already sent). */
  start(command: MysqlCommand): void {
    if (this.#settled) return; // refused at once (a closed connection)
    this.#command = command;
    this.#timer = armDeadline<QueryCall>(this.#deadline, QueryCall.#expire, this);
  }

  static #expire(call: QueryCall): void {
    if (call.#settled) return;
    call.#settled = true;
    const connection = call.#connection;
    const command = call.#command;
    if (command === undefined) return;
    const sent = connection._command === command;
    const dequeued = !sent && dequeue(connection, command);
    // The caller first; the kill's connection is set up after.
    call.#settle(deadlineError(call.#deadline));
    if (sent)
      endOnServer(connection, command, call.#copy, (listener) => {
        call.#late = listener;
      });
    // Never sent, so never answered: its 'end' is what a pool's query waits for to release the connection.
    else if (dequeued) command.emit('end');
  }
}

/** Takes a command that is not yet sent out of `connection`'s queue (or a hold's); true if it was there. */
function dequeue(connection: MysqlConnection, command: MysqlCommand): boolean {
  const queue = connection._commands;
  for (let index = 0; index < queue.length; index++) {
    if (queue.get(index) === command) {
      queue.removeOne(index);
      return true;
    }
  }
  return unhold(connection, command);
}
