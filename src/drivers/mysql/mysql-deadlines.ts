import { context, type Context } from '@opentelemetry/api';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { DeadlineWatch } from '../../deadline/index.js';
import { wrapMethods } from '../../hooks/index.js';
import {
  armDeadline,
  type CallDeadline,
  type DeadlinePolicy,
  type DeadlinePolicyOptions,
  type RequestAttributes,
} from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import { endsTransaction, operationOf } from '../sql.js';
import type { Installed } from '../../install/index.js';
import { DriverInstall } from '../driver-install.js';

/**
 * How long the server has to confirm a `KILL QUERY`: the killed query's connection is retired
 * (closed, so a pool drops it) when its answer has not come by then, because the server may still
 * be running it. A loopback or in-cluster kill takes a few ms; a partitioned network never answers.
 */
const KILL_CONFIRM_MS = 2_000;

/** `ER_QUERY_INTERRUPTED`: the server ended the statement because of a `KILL QUERY`. */
const ER_QUERY_INTERRUPTED = 1317;

type Callback = (error: unknown, ...results: unknown[]) => void;

/** mysql2's `RingQueue` (`lib/ring_queue.js`), the queue of a connection's commands and of a pool's waiters. */
interface RingQueue<T> {
  readonly length: number;
  get(index: number): T | undefined;
  removeOne(index: number): unknown;
  shift(): T | undefined;
}
/** A command of mysql2's (`lib/commands/*.js`): an EventEmitter that emits 'end' once the server's answer is read. */
interface MysqlCommand {
  onResult?: Callback | undefined;
  sql?: string;
  once(event: 'end', listener: () => void): unknown;
  emit(event: 'end'): boolean;
}
interface MysqlConfig {
  readonly host?: string;
  readonly port?: number;
  readonly socketPath?: string;
  readonly database?: string;
  readonly stream?: unknown;
}
interface MysqlStream {
  readonly destroyed?: boolean;
  destroy(error?: Error): void;
  once(event: 'close', listener: () => void): unknown;
  removeListener(event: 'close', listener: () => void): unknown;
}
/** The parts of mysql2's `BaseConnection` (`lib/base/connection.js`, mysql2 3.x) lifeline relies on. */
interface MysqlConnection {
  readonly config: MysqlConfig;
  readonly threadId: number | null;
  readonly _isMariaDB?: boolean;
  readonly _command: MysqlCommand | null | undefined;
  readonly _commands: RingQueue<MysqlCommand>;
  readonly _fatalError: unknown;
  readonly _protocolError: unknown;
  readonly _closing?: boolean;
  readonly stream: MysqlStream;
  addCommand(command: MysqlCommand): MysqlCommand;
  _addCommandClosedState(command: MysqlCommand): void;
  destroy(): void;
  close(): void;
  listenerCount(event: 'error'): number;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  once(event: 'error', listener: (error: unknown) => void): unknown;
}
/** …of its `BasePool` (`lib/base/pool.js`). */
interface MysqlPool {
  readonly config: { readonly connectionConfig: MysqlConfig };
  readonly _closed: boolean;
  readonly _connectionQueue: RingQueue<unknown>;
  readonly _freeConnections: RingQueue<MysqlConnection>;
  readonly _allConnections: RingQueue<MysqlConnection>;
}
interface PooledConnection {
  release(): void;
}

/** One loaded copy of mysql2: its own classes, for the commands lifeline makes and recognises. */
interface MysqlCopy {
  readonly BaseConnection: {
    new (options: { config: MysqlConfig }): MysqlConnection;
    readonly prototype: { readonly addCommand: AddCommand };
  };
  readonly Query: new (options: { sql: string }, callback: Callback) => MysqlCommand;
  readonly ClientHandshake: abstract new (...args: never[]) => MysqlCommand;
}

type ConnectionMethod = (this: MysqlConnection, ...args: unknown[]) => unknown;
type AddCommand = (this: MysqlConnection, command: MysqlCommand) => MysqlCommand;
type PoolMethod = (this: MysqlPool, ...args: unknown[]) => unknown;

const KIND = 'lifeline.mysql2';

const driver = new DriverInstall();

/**
 * Bounds mysql2 (3.x) by the deadline in the OpenTelemetry context, or the policy's, whichever is
 * sooner — MySQL and MariaDB, and so knex (`mysql2` client), Sequelize (`mysql` dialect), TypeORM,
 * MikroORM, Drizzle and Prisma's adapter on it; callback and promise (`mysql2/promise`) APIs alike,
 * `query` and `execute`, on a connection or a `Pool`. In every phase: connecting (a blackholed SYN,
 * a stuck handshake), waiting for a connection of an exhausted pool (the waiter leaves the pool's
 * queue), and waiting for the answer. At the deadline the caller gets a `DeadlineExceededError`
 * (through the library's own wrapper: `isDeadlineExceeded(err)` is true), and the server stops too:
 * a query already sent is ended with `KILL QUERY <thread id>` on a connection of its own (as the
 * `mysql` client's Ctrl-C), and its connection takes no other command until the server has answered
 * the killed query and the kill is done (a kill that came after the query ended would end the next
 * one); when that is not confirmed within 2 s the connection is closed, so a pool never hands out a
 * connection whose query may still be running. A query still queued on its connection is taken out
 * of the queue. A call that ends first leaves no timer.
 *
 * It patches `mysql2/lib/base/connection.js` and `lib/base/pool.js` in every copy the process has
 * loaded or loads later (CommonJS or ESM, before or after lifeline, with or without OpenTelemetry's
 * mysql2 instrumentation). Policy rules match `db.system.name` (`mysql`, or `mariadb` once the
 * server said so in its handshake), `db.namespace`, `db.operation.name` (the statement's first
 * word: `SELECT`), `server.address` and `server.port`. Not covered: queries without a callback
 * (the event-emitter and `.stream()` forms) get no deadline of their own (on a `Pool`, their
 * checkout is bounded).
 * @example
 * ```ts
 * installMysqlDeadlines({ policy: [{ match: { 'db.system.name': 'mysql' }, timeoutMs: 5_000 }] });
 * await withTimeout(2_000, () => pool.query('SELECT * FROM orders WHERE id = ?', [id])); // ends by 2 s, on the server too
 * ```
 */
export function installMysqlDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  return driver.install(options, [
    {
      module: 'mysql2',
      file: 'lib/base/connection.js',
      patch(exports, packageDir) {
        const copy = copyOf(exports, packageDir);
        if (copy === undefined) return undefined;
        return wrapMethods(copy.BaseConnection.prototype, KIND, {
          query: (original: ConnectionMethod) => boundQuery(original, copy),
          execute: (original: ConnectionMethod) => boundQuery(original, copy),
          addCommand: (original: AddCommand) => boundAddCommand(original, copy),
        });
      },
    },
    {
      module: 'mysql2',
      file: 'lib/base/pool.js',
      patch: (exports) =>
        wrapMethods((exports as { prototype?: object }).prototype, KIND, {
          getConnection: boundGetConnection,
          query: boundPoolQuery,
          execute: boundPoolQuery,
        }),
    },
  ]);
}

/** The copy's own command classes, next to the connection file being patched; `undefined` for a layout not known. */
function copyOf(exports: unknown, packageDir: string): MysqlCopy | undefined {
  try {
    const requireCopy = createRequire(join(packageDir, 'package.json'));
    const Query = requireCopy('./lib/commands/query.js') as MysqlCopy['Query'];
    const ClientHandshake = requireCopy('./lib/commands/client_handshake.js') as MysqlCopy['ClientHandshake'];
    if (typeof exports !== 'function' || typeof Query !== 'function' || typeof ClientHandshake !== 'function') return undefined;
    return { BaseConnection: exports as MysqlCopy['BaseConnection'], Query, ClientHandshake };
  } catch {
    return undefined;
  }
}

/** The SQL of a `query`/`execute` first argument: a string, an options object or a `Query` command. */
function textOf(sql: unknown): unknown {
  return typeof sql === 'object' && sql !== null ? (sql as { sql?: unknown }).sql : sql;
}

function mysqlAttributes(config: MysqlConfig, mariadb: boolean | undefined, text?: unknown): RequestAttributes {
  const attributes: Record<string, string | number> = { 'db.system.name': mariadb === true ? 'mariadb' : 'mysql' };
  if (config.socketPath !== undefined) attributes['server.address'] = config.socketPath;
  else {
    attributes['server.address'] = config.host ?? 'localhost';
    attributes['server.port'] = config.port ?? 3306;
  }
  if (config.database !== undefined && config.database !== '') attributes['db.namespace'] = config.database;
  const operation = operationOf(text);
  if (operation !== undefined) attributes['db.operation.name'] = operation;
  return attributes;
}

/** A pool's attributes: MariaDB when a connection it made said so. */
function poolAttributes(pool: MysqlPool, text?: unknown): RequestAttributes {
  return mysqlAttributes(pool.config.connectionConfig, pool._allConnections.get(0)?._isMariaDB, text);
}

/** `query(sql, values?, cb)` and `execute(sql, values?, cb)` on a connection, and `query(command)` (a pool's). */
function boundQuery(original: ConnectionMethod, copy: MysqlCopy): ConnectionMethod {
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
  return holds.get(connection)?.remove(command) ?? false;
}

/** The holds in force: a connection's commands wait in there while a killed query may still run. */
const holds = new WeakMap<MysqlConnection, Hold>();

/**
 * Keeps `connection` from starting its next command until released: the queued ones move in here,
 * and new ones come here too. On release they go back in order — or, if the connection closed
 * meanwhile, fail as mysql2 fails a command added to a closed connection.
 */
class Hold {
  readonly #connection: MysqlConnection;
  readonly #copy: MysqlCopy;
  readonly #held: MysqlCommand[] = [];
  readonly #addCommand: (command: MysqlCommand) => MysqlCommand;
  readonly #ownBefore: PropertyDescriptor | undefined;
  #released = false;

  constructor(connection: MysqlConnection, copy: MysqlCopy) {
    this.#connection = connection;
    this.#copy = copy;
    for (let command = connection._commands.shift(); command !== undefined; command = connection._commands.shift())
      this.#held.push(command);
    this.#ownBefore = Object.getOwnPropertyDescriptor(connection, 'addCommand');
    this.#addCommand = (command) => {
      this.#held.push(command);
      return command;
    };
    connection.addCommand = this.#addCommand;
    holds.set(connection, this);
  }

  remove(command: MysqlCommand): boolean {
    const index = this.#held.indexOf(command);
    if (index === -1) return false;
    this.#held.splice(index, 1);
    return true;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    const connection = this.#connection;
    holds.delete(connection);
    // mysql2 may have replaced it meanwhile (end(), a fatal error): then its replacement stays.
    if (connection.addCommand === this.#addCommand) {
      if (this.#ownBefore === undefined) Reflect.deleteProperty(connection, 'addCommand');
      else Object.defineProperty(connection, 'addCommand', this.#ownBefore);
    }
    const closed =
      connection._closing === true ||
      Boolean(connection._fatalError) ||
      Boolean(connection._protocolError) ||
      connection.stream.destroyed === true;
    const prototype = this.#copy.BaseConnection.prototype;
    for (const command of this.#held.splice(0)) {
      // Closed meanwhile (retired): a command with no callback would be failed with an 'error' event,
      // which a plain connection has no listener for; mysql2 itself leaves such a command unanswered.
      if (closed) {
        if (command.onResult !== undefined || connection.listenerCount('error') > 0) connection._addCommandClosedState(command);
      } else prototype.addCommand.call(connection, command); // an end() held in here (its Quit) still runs
    }
  }
}

/**
 * Ends a query the server is running: `KILL QUERY` on a connection of its own, while this one
 * starts nothing else. It carries on once the server has answered the killed query and the kill is
 * done (or the answer is the kill's own, 1317); if that has not happened within
 * {@link KILL_CONFIRM_MS}, the connection is retired.
 */
function endOnServer(
  connection: MysqlConnection,
  command: MysqlCommand,
  copy: MysqlCopy,
  onLateAnswer: (listener: (error: unknown) => void) => void,
): void {
  if (holds.has(connection)) return; // cannot be: a held connection sends nothing
  const held = new Hold(connection, copy);
  const stream = connection.stream;
  let answered = false;
  let interrupted = false;
  let killDone = false;
  const finish = (): void => {
    clearTimeout(confirm);
    stream.removeListener('close', finish);
    held.release();
  };
  const carryOn = (): void => {
    if (answered && (killDone || interrupted)) finish();
  };
  const confirm = setTimeout(() => {
    if (!(answered && (killDone || interrupted))) retire(connection);
    finish();
  }, KILL_CONFIRM_MS).unref();
  // Closed meanwhile (the server went away, the app destroyed it): the held commands fail now.
  stream.once('close', finish);
  onLateAnswer((error) => {
    if ((error as { errno?: unknown } | null)?.errno === ER_QUERY_INTERRUPTED) interrupted = true;
  });
  // 'end' comes as the answer is read, before mysql2 starts the next command.
  command.once('end', () => {
    answered = true;
    carryOn();
  });
  if (
    !killQuery(connection, copy, (done) => {
      killDone = done;
      carryOn();
    })
  ) {
    retire(connection);
    finish();
  }
}

/** True while lifeline makes its own kill connection: its handshake gets no deadline. */
let makingKiller = false;

/**
 * Sends `KILL QUERY <thread>` for `connection`'s thread on a new connection with the same config;
 * `done(true)` once the server has answered it (the kill is done, or refused: nothing is pending),
 * `done(false)` when it did not within {@link KILL_CONFIRM_MS}. False when no kill can be sent.
 */
function killQuery(connection: MysqlConnection, copy: MysqlCopy, done: (finished: boolean) => void): boolean {
  const thread = connection.threadId;
  const config = connection.config;
  // A stream object given in the config is that connection's own: there is no second one to open.
  if (typeof thread !== 'number' || (config.stream !== undefined && typeof config.stream !== 'function')) return false;
  let killer: MysqlConnection;
  makingKiller = true;
  try {
    killer = new copy.BaseConnection({
      config: Object.create(Object.getPrototypeOf(config) as object, Object.getOwnPropertyDescriptors(config)) as MysqlConfig,
    });
  } catch {
    return false;
  } finally {
    makingKiller = false;
  }
  killer.on('error', () => {}); // its failure only means the kill is not confirmed
  let finished = false;
  const finish = (confirmed: boolean): void => {
    if (finished) return;
    finished = true;
    clearTimeout(bound);
    killer.close();
    killer.stream.destroy();
    done(confirmed);
  };
  const bound = setTimeout(() => {
    finish(false);
  }, KILL_CONFIRM_MS).unref();
  // Added as a command, past `query`: the kill is no query of the app's (no deadline, no span of its own).
  killer.addCommand(
    new copy.Query({ sql: `KILL QUERY ${String(thread)}` }, (error) => {
      // Done, or refused by the server (an unknown thread: it is gone): no kill is on its way.
      // Not reached (a network error, no SQL state): not known.
      finish(error === null || error === undefined || typeof (error as { sqlState?: unknown }).sqlState === 'string');
    }),
  );
  return true;
}

/**
 * Closes `connection` (a pool drops it: `PoolConnection#destroy` takes it out), without waiting for
 * a server that may not answer, and without an 'error' event a checked-out connection may have no
 * listener for; the commands queued on it fail as on any closed connection.
 */
function retire(connection: MysqlConnection): void {
  connection.destroy();
  connection.stream.destroy();
}

/** `addCommand`: the handshake a new connection adds first is its connect phase, bounded in its maker's context. */
function boundAddCommand(original: AddCommand, copy: MysqlCopy): AddCommand {
  return function addCommand(this: MysqlConnection, command: MysqlCommand): MysqlCommand {
    const rules = driver.policy;
    if (rules !== undefined && !makingKiller && command instanceof copy.ClientHandshake) boundHandshake(this, command, rules);
    return original.call(this, command);
  };
}

function boundHandshake(connection: MysqlConnection, handshake: MysqlCommand, rules: DeadlinePolicy): void {
  const deadline = driverDeadline(rules, () => mysqlAttributes(connection.config, undefined));
  if (deadline === undefined) return;
  const stream = connection.stream;
  const timer = armDeadline(
    deadline,
    (made: MysqlConnection) => {
      stream.removeListener('close', cancel);
      if (made._command !== handshake || made._closing === true || made._fatalError) return;
      // The error reaches connect()'s callback, a pool's waiter, the promise API's createConnection,
      // a query queued behind the handshake; a connection whose queued query left at its own
      // deadline may have no one else to tell, and an unheard 'error' would end the process.
      if (made.listenerCount('error') === 0) made.once('error', () => {});
      made.stream.destroy(deadlineError(deadline));
    },
    connection,
  );
  const cancel = (): void => {
    timer.cancel();
    stream.removeListener('close', cancel);
  };
  handshake.once('end', cancel);
  stream.once('close', cancel);
}

/** The caller's context (with the deadline a policy gave) of each pool waiter lifeline made, and of mysql2's wrapper of it. */
const waiterContexts = new WeakMap<object, Context>();

function boundGetConnection(original: PoolMethod): PoolMethod {
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
function boundPoolQuery(original: PoolMethod): PoolMethod {
  return function query(this: MysqlPool, ...args: unknown[]): unknown {
    const rules = driver.policy;
    if (rules === undefined) return Reflect.apply(original, this, args);
    const active = context.active();
    const deadline = driverDeadline(rules, () => poolAttributes(this, textOf(args[0])), active);
    if (deadline === undefined) return Reflect.apply(original, this, args);
    return runUnderDeadline(deadline, active, () => Reflect.apply(original, this, args));
  };
}
