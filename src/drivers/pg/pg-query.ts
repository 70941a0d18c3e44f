/**
 * `Client#query` under a deadline: the caller is settled once, by the server's answer or by the
 * deadline; a query still queued leaves the queue, one already sent is ended on the server (pg-cancel.ts).
 */
import { context } from '@opentelemetry/api';
import type { DeadlineWatch } from '../../deadline/index.js';
import { armDeadline, noAttributes, type CallDeadline } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import { endsTransaction } from '../sql.js';
import { Cut, endOnServer } from './pg-cancel.js';
import { driver, pgAttributes, promiseWith, type Callback, type PgClient, type PgQuery } from './pg-driver.js';

type Query = (this: PgClient, ...args: unknown[]) => unknown;

export function boundQuery(original: Query): Query {
  return function query(this: PgClient, ...args: unknown[]): unknown {
    const [config, values, callback] = args;
    const rules = driver.policy;
    // Submittables (pg-cursor, pg-query-stream, a Query object) manage their own callbacks and rows.
    const plain =
      typeof config === 'string' ||
      (typeof config === 'object' && config !== null && typeof (config as { submit?: unknown }).submit !== 'function');
    if (rules === undefined || !plain) return Reflect.apply(original, this, args);
    const active = context.active();
    const text = typeof config === 'string' ? config : (config as { text?: unknown }).text;
    if (endsTransaction(text)) return Reflect.apply(original, this, args);
    const deadline = driverDeadline(
      rules,
      rules.hasRules ? () => pgAttributes(this.host, this.port, this.database, text) : noAttributes,
      active,
    );
    if (deadline === undefined) return Reflect.apply(original, this, args);
    const given = (
      typeof values === 'function' ? values : typeof callback === 'function' ? callback : (config as { callback?: unknown }).callback
    ) as Callback | undefined;
    let settle: Callback;
    let result: Promise<unknown> | undefined;
    if (given !== undefined) settle = given;
    else {
      const { promise, resolve, reject } = promiseWith(this._Promise);
      result = promise;
      settle = (error, rows) => {
        if (error) reject(error);
        else resolve(rows);
      };
    }
    const call = new QueryCall(this, deadline, settle);
    // The app's config object is left as it was (pg writes the callback into the object it is given).
    const own = typeof config === 'string' ? config : (Object.create(config) as object);
    const queued = this._queryQueue.length;
    const passed = typeof values === 'function' ? undefined : values;
    if (deadline.fromPolicy) runUnderDeadline(deadline, active, () => original.call(this, own, passed, call.callback));
    else original.call(this, own, passed, call.callback);
    call.start(queued);
    return result;
  };
}

/** One query under a deadline: settles its caller once, by the server's answer or by the deadline. */
class QueryCall {
  readonly #client: PgClient;
  readonly #deadline: CallDeadline;
  readonly #settle: Callback;
  #query: PgQuery | undefined;
  #timer: DeadlineWatch | undefined;
  #settled = false;
  /** The callback pg calls with the server's answer (or its own error). */
  readonly callback: Callback;

  constructor(client: PgClient, deadline: CallDeadline, settle: Callback) {
    this.#client = client;
    this.#deadline = deadline;
    this.#settle = settle;
    this.callback = (error, rows) => {
      if (this.#settled) return; // ended by its deadline: the cancel's error is ours, not the caller's
      this.#settled = true;
      this.#timer?.cancel();
      this.#settle(error, rows);
    };
  }

  /** Finds the query pg made (queued, or already sent) and arms the deadline. */
  start(queuedBefore: number): void {
    if (this.#settled) return;
    this.#query = findQuery(this.#client, this.callback, queuedBefore);
    // pg refused it (an ended or broken client): its error comes on the next tick.
    if (this.#query === undefined) return;
    this.#timer = armDeadline<QueryCall>(this.#deadline, QueryCall.#expire, this);
  }

  static #expire(call: QueryCall): void {
    if (call.#settled) return;
    call.#settled = true;
    const client = call.#client;
    const query = call.#query;
    const queued = query === undefined ? -1 : client._queryQueue.indexOf(query);
    if (queued !== -1) client._queryQueue.splice(queued, 1); // never sent: nothing runs on the server
    const sent = queued === -1 && query !== undefined && isOnTheWire(client, query);
    // Marked before the caller hears: pool.query releases the client in the caller's callback.
    const cut = sent ? new Cut(client) : undefined;
    // The caller first, then the server: the cancel's connection is set up after the caller has its error
    // (and even if the caller's callback throws: the pool gets its connection back only this way).
    try {
      call.#settle(deadlineError(call.#deadline));
    } finally {
      if (cut !== undefined) endOnServer(client, cut);
    }
  }
}

/** The query pg just made from `callback`: by its callback, else by where pg puts a new query. */
function findQuery(client: PgClient, callback: Callback, queuedBefore: number): PgQuery | undefined {
  // Where pg put it: sent at once (the client was idle), else the end of the queue.
  const active = client._activeQuery;
  if (active?.callback === callback) return active;
  const queue = client._queryQueue;
  if (queue.at(-1)?.callback === callback) return queue.at(-1);
  const sent = client._sentQueryQueue ?? [];
  const byCallback = queue.find((query) => query.callback === callback) ?? sent.find((query) => query.callback === callback);
  if (byCallback !== undefined) return byCallback;
  // pg wrapped the callback (its own `query_timeout`): the newest query is ours.
  if (queue.length > queuedBefore) return queue.at(-1);
  return sent.at(-1) ?? active ?? undefined;
}

function isOnTheWire(client: PgClient, query: PgQuery): boolean {
  return client._activeQuery === query || (client._sentQueryQueue?.includes(query) ?? false);
}
