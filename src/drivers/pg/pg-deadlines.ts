import { context, type Context } from '@opentelemetry/api';
import { contextWithoutDeadline, isDeadlineExceeded, type DeadlineWatch } from '../../deadline/index.js';
import { wrapMethods } from '../../hooks/index.js';
import { armDeadline, noAttributes, type CallDeadline, type DeadlinePolicyOptions, type RequestAttributes } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import { endsTransaction, operationOf } from '../sql.js';
import type { Installed } from '../../install/index.js';
import { DriverInstall } from '../driver-install.js';

/**
 * How long the server has to confirm a cancel: the cancelled query's connection is retired (closed,
 * so a pool drops it) when the server has not ended the query by then, because it may still be
 * running it. A loopback or in-cluster cancel takes a few ms; a partitioned network never answers.
 */
const CANCEL_CONFIRM_MS = 2_000;
/** Cancels sent for one query at most, and how far apart: only while the server has not answered it. */
const CANCEL_ATTEMPTS = 10;
const CANCEL_RETRY_MS = 50;

type Callback = (error: unknown, result?: unknown) => void;

/** The parts of node-postgres' `Client` lifeline relies on (pg 8). */
interface PgClient {
  listenerCount(event: 'error'): number;
  readonly host: string;
  readonly port: number;
  readonly database?: string;
  readonly processID: number | null;
  readonly secretKey: number | null;
  readonly pipeline?: boolean;
  readonly _Promise: PromiseConstructor;
  _connecting: boolean;
  _ending: boolean;
  _queryQueue: PgQuery[];
  _sentQueryQueue?: PgQuery[];
  _activeQuery: PgQuery | null;
  _pulseQueryQueue: () => void;
  connection: PgConnection;
  constructor: new (config: object) => PgClient;
  on(event: 'error', listener: () => void): void;
  removeListener(event: 'error', listener: () => void): void;
  [CUT]?: Cut | undefined;
}
interface PgQuery {
  callback?: Callback;
}
interface PgConnection {
  stream: { destroy(error?: Error): void; once(event: 'close', listener: () => void): void; destroyed?: boolean };
  connect(port: number | string, host?: string): void;
  cancel(processID: number, secretKey: number): void;
  on(event: string, listener: (...args: unknown[]) => void): void;
  once(event: string, listener: (...args: unknown[]) => void): void;
}
interface PgPool {
  readonly ending?: boolean;
  readonly Promise: PromiseConstructor;
  readonly options: { host?: string; port?: number; database?: string };
  _pendingQueue?: { callback: unknown }[];
  _idle?: unknown[];
}
interface PooledClient {
  release(error?: unknown): void;
}
type Query = (this: PgClient, ...args: unknown[]) => unknown;
type Connect = (this: PgClient, ...args: unknown[]) => unknown;
type PoolConnect = (this: PgPool, ...args: unknown[]) => unknown;
type NewClient = (this: PgPool, pendingItem: object) => unknown;
type Release = (this: PgPool, client: PgClient, idleListener: unknown, error?: unknown) => unknown;

/** The cut query a client's connection is still ending on the server, on the client (one per connection, so no WeakMap). */
const CUT = Symbol('lifeline.pg.cut');

const driver = new DriverInstall();

/**
 * Bounds node-postgres (`pg` 8) by the deadline in the OpenTelemetry context, or the policy's,
 * whichever is sooner — and so knex, Sequelize, TypeORM, MikroORM, Drizzle and Prisma's pg
 * adapter, which sit on it. In every phase: waiting for a connection from a `Pool` (exhausted), connecting (a
 * blackholed SYN), and waiting for the answer. At the deadline the caller gets a
 * `DeadlineExceededError` (through the library's own wrapper: `isDeadlineExceeded(err)` is true),
 * and the server's work ends too: a query already sent is cancelled with PostgreSQL's cancel
 * protocol (a second connection, as `psql`'s Ctrl-C), and its connection takes no other query until
 * the server has ended it; when the server does not confirm within 2 s the connection is closed, so
 * a pool never hands out a connection whose query may still be running. A query still queued on
 * its client is taken out of the queue. A call that ends first leaves no timer.
 *
 * It patches `pg/lib/client.js` and `pg-pool` in every copy the process has loaded or loads later
 * (CommonJS or ESM, before or after lifeline, with or without OpenTelemetry's pg instrumentation).
 * Policy rules match `db.system.name` (`postgresql`), `db.namespace`, `db.operation.name` (the
 * statement's first word: `SELECT`), `server.address` and `server.port`. Not covered: pg-native,
 * and submittables (`pg-cursor`, `pg-query-stream`), whose queries get no deadline.
 * @example
 * ```ts
 * installPgDeadlines({ policy: [{ match: { 'db.system.name': 'postgresql' }, timeoutMs: 5_000 }] });
 * await withTimeout(2_000, () => pool.query('SELECT * FROM orders WHERE id = $1', [id])); // ends by 2 s, on the server too
 * ```
 */
export function installPgDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  return driver.install(options, [
    {
      module: 'pg',
      file: 'lib/client.js',
      patch: (exports) =>
        wrapMethods((exports as { prototype?: object }).prototype, 'lifeline.pg', { query: boundQuery, connect: boundConnect }),
    },
    {
      module: 'pg-pool',
      file: 'index.js',
      patch: (exports) =>
        wrapMethods((exports as { prototype?: object }).prototype, 'lifeline.pg', {
          connect: boundPoolConnect,
          newClient: boundNewClient,
          _release: boundRelease,
        }),
    },
  ]);
}

function pgAttributes(
  host: string | undefined,
  port: number | string | undefined,
  database: string | undefined,
  text?: unknown,
): RequestAttributes {
  const attributes: Record<string, string | number> = { 'db.system.name': 'postgresql' };
  if (host !== undefined) attributes['server.address'] = host;
  if (port !== undefined) attributes['server.port'] = Number(port);
  if (database !== undefined) attributes['db.namespace'] = database;
  const operation = operationOf(text);
  if (operation !== undefined) attributes['db.operation.name'] = operation;
  return attributes;
}

function boundQuery(original: Query): Query {
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

/** `Promise.withResolvers`, on the promise class the driver was configured with. */
function promiseWith(Promise: PromiseConstructor): {
  promise: Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
} {
  let resolve!: (value: unknown) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<unknown>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  return { promise, resolve, reject };
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

/**
 * Ends a query the server is running: a cancel request on a connection of its own, while the
 * client sends nothing else (a cancel that arrived after the query ended would cancel the next
 * one). The client carries on once the server has answered the cancelled query and the cancel
 * connection has closed; if the server has not answered within {@link CANCEL_CONFIRM_MS}, or the
 * client is pipelined (the queries behind it are already on the wire), the connection is retired.
 * `cut` hears which: clean (the server is idle on it again, outside any transaction) or not.
 */
function endOnServer(client: PgClient, cut: Cut): void {
  if (client.processID === null || client.secretKey === null) {
    retire(client, cut);
    return;
  }
  const held = holdQueue(client);
  let cancelClosed = false;
  /** The server's transaction status once it has answered the cancelled query ('I': idle, outside a transaction). */
  let answered: string | undefined;
  const carryOn = (): void => {
    if (!cancelClosed || answered === undefined) return;
    clearTimeout(confirm);
    held.release();
    cut.settle(answered === 'I');
  };
  // The cancelled query ends with the server's answer (an error, 57014) and then ReadyForQuery, which
  // says whether a transaction is still open. After pg's own listener has taken it (its pulse is held).
  client.connection.once('readyForQuery', (message) => {
    answered = (message as { status?: string } | undefined)?.status ?? '';
    carryOn();
  });
  let given = false;
  const cancel = (attempt: number): void => {
    cancelRequest(client, () => {
      // A cancel that reached the backend before it began the query (a short deadline, a busy server)
      // is dropped by PostgreSQL: while the query is unanswered, ask again, a little later.
      if (answered === undefined && !given && attempt < CANCEL_ATTEMPTS) {
        setTimeout(cancel, CANCEL_RETRY_MS, attempt + 1).unref();
        return;
      }
      cancelClosed = true;
      carryOn();
    });
  };
  const confirm = setTimeout(() => {
    given = true;
    // Unanswered, the server may still run it; a cancel not yet done may still hit the next query.
    if (answered === undefined || !cancelClosed) retire(client, cut);
    held.release();
  }, CANCEL_CONFIRM_MS).unref();
  cancel(1);
  if (client.pipeline === true) retire(client, cut);
}

/**
 * A connection whose query a deadline cut, until the server has ended that query: whether it can
 * serve again (clean) or must be closed. pg-pool gets the client back only then ({@link boundRelease}).
 */
class Cut {
  readonly #client: PgClient;
  #clean: boolean | undefined;
  #then: ((clean: boolean) => void) | undefined;

  constructor(client: PgClient) {
    this.#client = client;
    client[CUT] = this;
  }

  /** Once: later calls change nothing (a retire after the answer, the confirm timer after a retire). */
  settle(clean: boolean): void {
    if (this.#clean !== undefined) return;
    this.#clean = clean;
    // Off the client: a later release, with no cut pending, is pg-pool's as always.
    if (this.#client[CUT] === this) this.#client[CUT] = undefined;
    this.#then?.(clean);
  }

  whenSettled(then: (clean: boolean) => void): void {
    if (this.#clean === undefined) this.#then = then;
    else then(this.#clean);
  }
}

/** Sends PostgreSQL's CancelRequest for `client`'s backend on a new connection; `done` once it closed (or failed). */
function cancelRequest(client: PgClient, done: () => void): void {
  let canceller: PgClient;
  try {
    canceller = new client.constructor({ host: client.host, port: client.port });
  } catch {
    done();
    return;
  }
  const connection = canceller.connection;
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    clearTimeout(bound);
    connection.stream.destroy();
    done();
  };
  // A cancel that cannot connect (a partitioned network) is given up with the confirmation.
  const bound = setTimeout(finish, CANCEL_CONFIRM_MS).unref();
  connection.on('error', finish);
  connection.stream.once('close', finish);
  connection.once('connect', () => {
    connection.cancel(client.processID ?? 0, client.secretKey ?? 0);
  });
  if (client.host.startsWith('/')) connection.connect(`${client.host}/.s.PGSQL.${client.port}`);
  else connection.connect(client.port, client.host);
}

/** Keeps `client` from sending its next query until released. */
function holdQueue(client: PgClient): { release(): void } {
  const own = Object.prototype.hasOwnProperty.call(client, '_pulseQueryQueue');
  const previous = client._pulseQueryQueue;
  let held = true;
  client._pulseQueryQueue = () => {};
  return {
    release() {
      if (!held) return;
      held = false;
      if (own) client._pulseQueryQueue = previous;
      else Reflect.deleteProperty(client, '_pulseQueryQueue');
      client._pulseQueryQueue();
    },
  };
}

/**
 * Closes `client`'s connection without waiting for a server that may not answer. A client someone
 * listens to (pg-pool's idle listener, the app's) is told, as by a dropped connection: the pool
 * removes it. One nobody listens to (checked out) is ended as `end()` would, with no 'error' event
 * to crash the process; its queries fail with "Connection terminated", and a pool drops it when it is released.
 */
function retire(client: PgClient, cut?: Cut): void {
  cut?.settle(false);
  if (client.listenerCount('error') === 0) client._ending = true;
  client.connection.stream.destroy();
}

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
function boundRelease(original: Release): Release {
  return function _release(this: PgPool, client: PgClient, idleListener: unknown, error?: unknown): unknown {
    const cut = client[CUT];
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

function boundConnect(original: Connect): Connect {
  return function connect(this: PgClient, ...args: unknown[]): unknown {
    const callback = args[0] as Callback | undefined;
    const rules = driver.policy;
    if (rules === undefined) return Reflect.apply(original, this, args);
    const active = context.active();
    const deadline = driverDeadline(rules, () => pgAttributes(this.host, this.port, this.database), active);
    if (deadline === undefined) return Reflect.apply(original, this, args);
    let result: Promise<unknown> | undefined;
    let settle: Callback;
    if (callback !== undefined) settle = callback;
    else {
      const { promise, resolve, reject } = promiseWith(this._Promise);
      result = promise;
      settle = (error) => {
        if (error) reject(error);
        else resolve(this);
      };
    }
    // A connect still under way at the deadline: its socket is destroyed with the deadline's error,
    // which pg hands to the connect callback (and pg-pool to its waiter).
    const timer = armDeadline(
      deadline,
      (client: PgClient) => {
        if (client._connecting) client.connection.stream.destroy(deadlineError(deadline));
      },
      this,
    );
    runUnderDeadline(deadline, active, () =>
      original.call(this, (error: unknown, client?: unknown) => {
        timer.cancel();
        settle(error, client); // pg passes the client too (knex reads it)
      }),
    );
    return result;
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
function boundNewClient(original: NewClient): NewClient {
  return function newClient(this: PgPool, pendingItem: PendingItem): unknown {
    if (connecting || driver.policy === undefined) return original.call(this, pendingItem);
    const owner = pendingItem[CALLER] ?? contextWithoutDeadline(context.active());
    return context.with(owner, () => original.call(this, pendingItem));
  };
}

function boundPoolConnect(original: PoolConnect): PoolConnect {
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
