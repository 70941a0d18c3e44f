/**
 * The server's end of a cut pg query: PostgreSQL's cancel request on a connection of its own, the
 * client held meanwhile, and the connection retired when the server does not confirm. Needs no
 * policy, so it does not import the install.
 */
import type { PgClient } from './pg-driver.js';

/**
 * How long the server has to confirm a cancel: the cancelled query's connection is retired (closed,
 * so a pool drops it) when the server has not ended the query by then, because it may still be
 * running it. A loopback or in-cluster cancel takes a few ms; a partitioned network never answers.
 */
const CANCEL_CONFIRM_MS = 2_000;
/** Cancels sent for one query at most, and how far apart: only while the server has not answered it. */
const CANCEL_ATTEMPTS = 10;
const CANCEL_RETRY_MS = 50;

/** The cut query a client's connection is still ending on the server, on the client (one per connection, so no WeakMap). */
const CUT = Symbol('lifeline.pg.cut');
interface CutClient extends PgClient {
  [CUT]?: Cut | undefined;
}

/** The cut `client` is still ending on the server, if any: pg-pool's release waits for it. */
export function cutOf(client: CutClient): Cut | undefined {
  return client[CUT];
}

/**
 * Ends a query the server is running: a cancel request on a connection of its own, while the
 * client sends nothing else (a cancel that arrived after the query ended would cancel the next
 * one). The client carries on once the server has answered the cancelled query and the cancel
 * connection has closed; if the server has not answered within {@link CANCEL_CONFIRM_MS}, or the
 * client is pipelined (the queries behind it are already on the wire), the connection is retired.
 * `cut` hears which: clean (the server is idle on it again, outside any transaction) or not.
 */
export function endOnServer(client: PgClient, cut: Cut): void {
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
 * serve again (clean) or must be closed. pg-pool gets the client back only then (`boundRelease`, in pg-pool.ts).
 */
export class Cut {
  readonly #client: CutClient;
  #clean: boolean | undefined;
  #then: ((clean: boolean) => void) | undefined;

  constructor(client: PgClient) {
    this.#client = client;
    this.#client[CUT] = this;
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
