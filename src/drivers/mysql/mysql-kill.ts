/**
 * The server's end of a cut mysql2 query: `KILL QUERY` on a connection of its own, the connection's
 * next commands held meanwhile, and the connection retired when the kill is not confirmed. Needs no
 * policy, so it does not import the install; its state (the holds, the kill connection being made)
 * is its own, read by the others through the functions below.
 */
import type { MysqlCommand, MysqlConfig, MysqlConnection, MysqlCopy } from './mysql-driver.js';

/**
 * How long the server has to confirm a `KILL QUERY`: the killed query's connection is retired
 * (closed, so a pool drops it) when its answer has not come by then, because the server may still
 * be running it. A loopback or in-cluster kill takes a few ms; a partitioned network never answers.
 */
const KILL_CONFIRM_MS = 2_000;

/** `ER_QUERY_INTERRUPTED`: the server ended the statement because of a `KILL QUERY`. */
const ER_QUERY_INTERRUPTED = 1317;

/** The holds in force: a connection's commands wait in there while a killed query may still run. */
const holds = new WeakMap<MysqlConnection, Hold>();

/** Takes `command` out of the hold on `connection`, if there is one; true if it was there. */
export function unhold(connection: MysqlConnection, command: MysqlCommand): boolean {
  return holds.get(connection)?.remove(command) ?? false;
}

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
export function endOnServer(
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

/** True while the kill connection is being made: its handshake is no connect of the app's. */
export function makingKillConnection(): boolean {
  return makingKiller;
}

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
