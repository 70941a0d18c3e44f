import { context } from '@opentelemetry/api';
import { DeadlineExceededError, monotonicNow } from '../../deadline/index.js';
import { wrapMethod } from '../../hooks/index.js';
import { armDeadline, type CallDeadline, type DeadlinePolicyOptions, type RequestAttributes } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import type { Installed } from '../../install/index.js';
import { DriverInstall } from '../driver-install.js';

/** The parts of the driver's `MongoClient` lifeline reads (mongodb 6.13+, 7). */
interface MongoClientLike {
  readonly options?: { readonly hosts?: readonly { readonly host?: string; readonly port?: number }[]; readonly srvHost?: string };
}
/** …of an operation (`lib/operations/operation.js`): its options are what every phase reads the signal from. */
interface Operation {
  options?: { signal?: AbortSignal; [option: string]: unknown };
  readonly commandName?: string;
  readonly ns?: { readonly db?: string };
  /** A `RunCommandOperation`'s command document (`db.command()`). */
  readonly command?: Record<string, unknown>;
}
type ExecuteOperation = (this: unknown, client: MongoClientLike, operation: Operation, timeoutContext?: unknown) => Promise<unknown>;
type ConnectionCommand = (
  this: unknown,
  ns: unknown,
  command: Record<string, unknown>,
  options?: { signal?: AbortSignal; omitMaxTimeMS?: boolean },
  responseType?: unknown,
) => Promise<unknown>;

const KIND = 'lifeline.mongodb';

/**
 * The commands that get the deadline as `maxTimeMS`: those that read or write documents, where a
 * server can spend long. Not `getMore` (MongoDB rejects it there unless the cursor awaits data, and
 * then it means the await), not commands in a transaction (the transaction's own limit applies),
 * and not `distinct`: FerretDB 1.x rejects `maxTimeMS` on it (`unknown field`). The client still
 * ends each of these at the deadline.
 */
const SERVER_LIMITED = new Set(['find', 'aggregate', 'count', 'findAndModify', 'insert', 'update', 'delete']);

/** MongoDB's `MaxTimeMSExpired`: the server ended the command at its `maxTimeMS`. */
const MAX_TIME_MS_EXPIRED = 50;

/** The deadline of each operation's signal, where lifeline gave it one; read when its commands are sent. */
const deadlines = new WeakMap<AbortSignal, CallDeadline>();

const driver = new DriverInstall();

/**
 * Bounds the MongoDB Node.js driver (`mongodb` 6.13+ and 7, and Mongoose, which sits on it) by the
 * deadline in the OpenTelemetry context, or the policy's, whichever is sooner, in every phase of
 * an operation: connecting the client, server selection, waiting for a pooled connection, sending,
 * and waiting for the reply. At the deadline the caller gets a `DeadlineExceededError` (so
 * `isDeadlineExceeded(err)` is true); a connection whose reply was still awaited is closed (the
 * driver's own abort path), so the pool never hands out one with a reply in flight, and the server
 * stops the command: it was sent the budget left as `maxTimeMS` (find, aggregate, count,
 * findAndModify, insert, update, delete; a smaller `maxTimeMS` of the caller's stays). A cursor's
 * every batch (`find`, then each `getMore`) is bounded by the deadline in force when it is fetched.
 * An operation that ends first leaves no timer.
 *
 * Why not the driver's `timeoutMS`: in driver 7 it has no effect (deprecated, no client-side
 * timeout is made of it); the operation's `signal` (6.13+) is what every phase still honours, so
 * lifeline gives each operation a signal of its own (combined with the caller's, if any) and
 * aborts it at the deadline, with the `DeadlineExceededError` as the reason the caller gets.
 *
 * It patches `mongodb/lib/operations/execute_operation.js` (the one entry of every operation) and
 * `Connection#command` in `mongodb/lib/cmap/connection.js`, in every copy loaded before or after
 * this call. Policy rules match `db.system.name` (`mongodb`), `db.namespace` (the database),
 * `db.operation.name` (the command: `find`, `insert`, `aggregate`, a `db.command()`'s first key),
 * `server.address` and `server.port` (the first host of the connection string: the server is
 * chosen after the deadline is). Change streams' long-lived awaits and GridFS streams are bounded
 * per operation like any other, not as a whole.
 * @example
 * ```ts
 * installMongoDeadlines({ policy: [{ match: { 'db.system.name': 'mongodb', 'db.operation.name': 'aggregate' }, timeoutMs: 10_000 }] });
 * await withTimeout(2_000, () => orders.find({ status: 'open' }).toArray()); // ends by 2 s, on the server too
 * ```
 */
export function installMongoDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  return driver.install(options, [
    {
      module: 'mongodb',
      file: 'lib/operations/execute_operation.js',
      patch: (exports) => wrapMethod<ExecuteOperation>(exports as object, 'executeOperation', KIND, boundExecute),
    },
    {
      module: 'mongodb',
      file: 'lib/cmap/connection.js',
      patch(exports) {
        const prototype = (exports as { Connection?: { prototype?: object } }).Connection?.prototype;
        return prototype === undefined ? undefined : wrapMethod<ConnectionCommand>(prototype, 'command', KIND, limitedCommand);
      },
    },
  ]);
}

function mongoAttributes(client: MongoClientLike, operation: Operation): RequestAttributes {
  const attributes: Record<string, string | number> = { 'db.system.name': 'mongodb' };
  const seed = client.options?.hosts?.[0];
  const host = client.options?.srvHost ?? seed?.host;
  if (host !== undefined) attributes['server.address'] = host;
  if (seed?.port !== undefined && client.options?.srvHost === undefined) attributes['server.port'] = seed.port;
  if (typeof operation.ns?.db === 'string') attributes['db.namespace'] = operation.ns.db;
  const name = commandOf(operation);
  if (name !== undefined) attributes['db.operation.name'] = name;
  return attributes;
}

/** The command an operation sends: its name, or the first key of a `db.command()` document. */
function commandOf(operation: Operation): string | undefined {
  return operation.commandName === 'runCommand' && operation.command !== undefined
    ? Object.keys(operation.command)[0]
    : operation.commandName;
}

/**
 * What the driver sends to clean up after an operation the deadline ended, often in the same
 * expired context: refused too, a transaction would keep its locks until the server's lifetime
 * limit (60 s) and a cursor its memory for 10 minutes. They get no deadline.
 */
const CLEANUP = new Set(['killCursors', 'endSessions', 'abortTransaction']);

function boundExecute(original: ExecuteOperation): ExecuteOperation {
  return function executeOperation(this: unknown, ...args) {
    const [client, operation] = args;
    const rules = driver.policy;
    const given = (operation as Operation | null | undefined)?.options;
    if (rules === undefined || typeof given !== 'object' || CLEANUP.has(commandOf(operation) ?? '')) return original.apply(this, args);
    const active = context.active();
    const deadline = driverDeadline(rules, () => mongoAttributes(client, operation), active);
    if (deadline === undefined) return original.apply(this, args);
    if (deadline.monotonicAt <= monotonicNow()) return Promise.reject(deadlineError(deadline));
    const controller = new AbortController();
    const signal = given.signal === undefined ? controller.signal : AbortSignal.any([given.signal, controller.signal]);
    deadlines.set(signal, deadline);
    // A copy: the caller's options object (a cursor's, reused for its getMores) keeps no signal of ours.
    operation.options = { ...given, signal };
    const timer = armDeadline(deadline, abort, { controller, deadline });
    return runUnderDeadline(deadline, active, () => original.apply(this, args)).finally(() => {
      timer.cancel();
      if (operation.options?.signal === signal) operation.options = given;
    });
  };
}

/** The deadline passed: every phase waiting on the signal rejects with the caller's error. */
function abort({ controller, deadline }: { controller: AbortController; deadline: CallDeadline }): void {
  controller.abort(deadlineError(deadline));
}

/**
 * Sends the budget left as `maxTimeMS`, so the server stops too (the client's abort only closes
 * the connection, which MongoDB notices late or not at all); a `MaxTimeMSExpired` that only this
 * limit could have caused is the deadline's.
 */
function limitedCommand(original: ConnectionCommand): ConnectionCommand {
  return function command(this: unknown, ...args) {
    const [ns, cmd, options, responseType] = args;
    const deadline = options?.signal === undefined ? undefined : deadlines.get(options.signal);
    const limited = deadline === undefined ? undefined : withMaxTime(cmd, deadline, options?.omitMaxTimeMS === true);
    if (deadline === undefined || limited === undefined) return original.apply(this, args);
    return original.call(this, ns, limited, options, responseType).catch((error: unknown) => {
      if ((error as { code?: unknown } | null)?.code !== MAX_TIME_MS_EXPIRED) throw error;
      throw new DeadlineExceededError(deadline.at, deadline.source, { cause: error });
    });
  };
}

/** `cmd` with the deadline's budget as its `maxTimeMS`, or `undefined` where it gets none or keeps a smaller one. */
function withMaxTime(cmd: Record<string, unknown>, deadline: CallDeadline, omit: boolean): Record<string, unknown> | undefined {
  const name = Object.keys(cmd)[0];
  if (omit || name === undefined || !SERVER_LIMITED.has(name) || cmd.autocommit === false) return undefined;
  const budget = Math.floor(deadline.monotonicAt - monotonicNow());
  if (budget <= 0) return undefined; // the signal aborts it now
  const own = cmd.maxTimeMS;
  if (typeof own === 'number' && own > 0 && own <= budget) return undefined;
  return { ...cmd, maxTimeMS: budget };
}
