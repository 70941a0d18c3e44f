import { context, type Context } from '@opentelemetry/api';
import { contextWithoutDeadline, monotonicNow, type DeadlineWatch } from '../../deadline/index.js';
import { wrapMethod } from '../../hooks/index.js';
import { armDeadline, type CallDeadline, type DeadlinePolicyOptions, type RequestAttributes } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import type { Installed } from '../../install/index.js';
import { DriverInstall } from '../driver-install.js';
import { blockingTimeoutOf, endedByDeadline, mayBlock, shortenedTimeout, type BlockingTimeout } from './blocking-timeout.js';

type Arg = string | Buffer;

/** The options `RedisCommandsQueue#addCommand` takes (node-redis 5 and 6). */
interface QueueOptions {
  readonly chainId?: symbol;
  readonly abortSignal?: AbortSignal;
  readonly [option: string]: unknown;
}
/** `@redis/client`'s `RedisCommandsQueue`: every command of a client goes through its `addCommand`. */
type Queue = object;
type AddCommand = (this: Queue, args: Arg[], options?: QueueOptions) => Promise<unknown>;
type Encode = (args: Arg[]) => unknown;
/** The parts of `@redis/client`'s `RedisClient` lifeline reads. */
interface NodeRedisClient {
  readonly _self?: NodeRedisClient;
  readonly options?: {
    readonly socket?: { readonly host?: string; readonly port?: number; readonly path?: string };
    readonly database?: number;
  };
  _getQueue?(): Queue;
}
type ClientMethod = (this: NodeRedisClient, ...args: unknown[]) => unknown;

/** What a queue's commands are matched by: the client it belongs to, and the db it selected last. */
interface Connection {
  readonly client: NodeRedisClient;
  db: number | undefined;
}

const driver = new DriverInstall();
/** Each queue's client: the queue has no link to it, and the policy's attributes name its server. */
const connections = new WeakMap<Queue, Connection>();
/** Blocking commands' argument lists (lifeline's copies) and what to shorten in them when they are written. */
const shortening = new WeakMap<Arg[], Shortening>();

interface Shortening {
  readonly timeout: BlockingTimeout;
  readonly given: Arg;
  readonly deadline: CallDeadline;
}

/**
 * Bounds node-redis (`redis` 5 and 6, `@redis/client`: clients, pools, clusters and sentinels) by
 * the deadline in the OpenTelemetry context, or the policy's, whichever is sooner. In every phase:
 * queued while the client connects or reconnects (its offline queue), queued to be written, and
 * waiting for the reply. At the deadline the caller's command rejects with a
 * `DeadlineExceededError`; a command not yet written leaves the queue and is never sent (with
 * node-redis' own `abortSignal`, which applies to commands not yet written); one already written
 * stays in node-redis' queue until its reply arrives, which is then discarded: replies never shift
 * onto the commands behind it. A command that ends first leaves no timer.
 *
 * The server's end, for Redis: a blocking command (`BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`,
 * `BZPOPMIN`/`MAX`, `BLMPOP`, `BZMPOP`, `XREAD`/`XREADGROUP … BLOCK`, `WAIT`, `WAITAOF`) is written
 * with its timeout shortened to the time left at that moment (rounded up to the millisecond; `0`,
 * forever, included), so the server stops blocking the connection just after the deadline and the
 * commands behind it run. Redis 6 or later (earlier versions take whole seconds only). The caller
 * still gets the `DeadlineExceededError` at the deadline, not the server's nil reply.
 *
 * `multi` and pipelines are bound per command; their commands are written together (a chain), so
 * none is taken out of the queue: `exec` rejects at the deadline, and what the server answers
 * later is discarded. node-redis' handshake (`HELLO`, `AUTH`, `SELECT`, `CLIENT SETINFO`) is not
 * bound, and `connect()` runs outside the caller's deadline: a connection outlives the command
 * that opened it (node-redis' own `connectTimeout` bounds it).
 *
 * Policy rules match `db.system.name` (`redis`), `db.namespace` (the db index, `"0"`),
 * `db.operation.name` (the command, upper-case: `GET`), `server.address` and `server.port`.
 * @example
 * ```ts
 * installNodeRedisDeadlines({ policy: [{ match: { 'db.operation.name': 'GET' }, timeoutMs: 50 }] });
 * await withTimeout(300, () => client.blPop('jobs', 0)); // DeadlineExceededError at 300 ms; the server stops waiting too
 * ```
 */
export function installNodeRedisDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  return driver.install(options, [
    {
      module: '@redis/client',
      file: 'dist/lib/client/commands-queue.js',
      patch(exports) {
        const prototype = (exports as { default?: { prototype?: object } }).default?.prototype;
        return prototype === undefined ? undefined : wrapMethod<AddCommand>(prototype, 'addCommand', 'lifeline.redis', boundAddCommand);
      },
    },
    {
      module: '@redis/client',
      file: 'dist/lib/RESP/encoder.js',
      // The queue calls the encoder through its module's exports when it writes a command.
      patch: (exports) => wrapMethod<Encode>(exports as object, 'default', 'lifeline.redis', shortenOnWrite),
    },
    {
      module: '@redis/client',
      file: 'dist/lib/client/index.js',
      patch(exports) {
        const prototype = (exports as { default?: { prototype?: object } }).default?.prototype;
        if (prototype === undefined) return undefined;
        const undo = [
          wrapMethod<ClientMethod>(prototype, 'connect', 'lifeline.redis', connectWithoutDeadline),
          wrapMethod<ClientMethod>(prototype, 'sendCommand', 'lifeline.redis', knowingTheClient),
        ];
        return () => {
          for (const restore of undo) restore?.();
        };
      },
    },
  ]);
}

/** Links `client`'s queue to it, once. */
function remember(client: NodeRedisClient): void {
  const self = client._self ?? client;
  const queue = typeof self._getQueue === 'function' ? self._getQueue() : undefined;
  if (queue !== undefined && !connections.has(queue)) connections.set(queue, { client: self, db: undefined });
}

/** A connection outlives the command that opened it: its handshake, pings and reconnects carry no caller's deadline. */
function connectWithoutDeadline(original: ClientMethod): ClientMethod {
  return function connect(this: NodeRedisClient, ...args: unknown[]): unknown {
    remember(this);
    const active = context.active();
    const detached = contextWithoutDeadline(active);
    return detached === active ? Reflect.apply(original, this, args) : context.with(detached, () => Reflect.apply(original, this, args));
  };
}

/** For clients connected before lifeline was installed. */
function knowingTheClient(original: ClientMethod): ClientMethod {
  return function sendCommand(this: NodeRedisClient, ...args: unknown[]): unknown {
    if (driver.policy !== undefined) remember(this);
    return Reflect.apply(original, this, args);
  };
}

function nameOf(args: readonly Arg[]): string {
  return String(args[0]).toUpperCase();
}

function nodeRedisAttributes(connection: Connection | undefined, args: readonly Arg[]): RequestAttributes {
  const attributes: Record<string, string | number> = { 'db.system.name': 'redis', 'db.operation.name': nameOf(args) };
  const options = connection?.client.options;
  if (connection !== undefined) attributes['db.namespace'] = String(connection.db ?? options?.database ?? 0);
  const socket = options?.socket;
  if (options !== undefined) {
    attributes['server.address'] = socket?.path ?? socket?.host ?? 'localhost';
    if (socket?.path === undefined) attributes['server.port'] = socket?.port ?? 6379;
  }
  return attributes;
}

/** node-redis writes its own handshake as the first chain on a new connection: it is not the caller's. */
function isHandshake(options: QueueOptions | undefined): boolean {
  return options?.chainId?.description === 'Socket Initiator';
}

function boundAddCommand(original: AddCommand): AddCommand {
  return function addCommand(this: Queue, args: Arg[], options?: QueueOptions): Promise<unknown> {
    const rules = driver.policy;
    if (rules === undefined || !Array.isArray(args) || args.length === 0 || isHandshake(options)) return original.call(this, args, options);
    const active = context.active();
    const connection = connections.get(this);
    const deadline = driverDeadline(rules, () => nodeRedisAttributes(connection, args), active);
    if (deadline === undefined) return original.call(this, args, options);
    return new CommandCall(deadline, connection).send(this, original, args, options, active);
  };
}

/** One command under a deadline: settles its caller once, by the server's reply or by the deadline. */
class CommandCall {
  readonly #deadline: CallDeadline;
  readonly #connection: Connection | undefined;
  #abort: AbortController | undefined;
  #timer: DeadlineWatch | undefined;
  #settled = false;
  #reject: ((error: unknown) => void) | undefined;

  constructor(deadline: CallDeadline, connection: Connection | undefined) {
    this.#deadline = deadline;
    this.#connection = connection;
  }

  send(queue: Queue, original: AddCommand, args: Arg[], options: QueueOptions | undefined, active: Context): Promise<unknown> {
    const sent = this.#shortening(args);
    let own = options;
    // A chain (MULTI … EXEC, a pipeline, a reset) is written as a whole: none of it leaves the queue.
    if (options?.chainId === undefined) {
      const abort = new AbortController();
      this.#abort = abort;
      const given = options?.abortSignal;
      own = { ...options, abortSignal: given === undefined ? abort.signal : AbortSignal.any([given, abort.signal]) };
    }
    const inner = runUnderDeadline(this.#deadline, active, () => original.call(queue, sent, own));
    return new Promise<unknown>((resolve, reject) => {
      this.#reject = reject;
      inner.then(
        (reply) => {
          if (this.#settled) return; // ended by its deadline: a late reply is discarded
          if (sent !== args && endedByDeadline(reply, this.#deadline.monotonicAt, monotonicNow())) {
            CommandCall.#expire(this); // the shortened wait ran out: the deadline's, before its timer fired
            return;
          }
          this.#settle();
          if (nameOf(args) === 'SELECT' && this.#connection !== undefined) this.#connection.db = Number(String(args[1]));
          resolve(reply);
        },
        (error: unknown) => {
          if (this.#settled) return; // node-redis' AbortError for the command the deadline took out
          this.#settle();
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the driver's own error, passed on as it is
          reject(error);
        },
      );
      if (!this.#settled) this.#timer = armDeadline<CommandCall>(this.#deadline, CommandCall.#expire, this);
    });
  }

  #settle(): void {
    this.#settled = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  static #expire(call: CommandCall): void {
    if (call.#settled) return;
    call.#settle();
    call.#abort?.abort(); // still queued: node-redis takes it out, it is never written
    call.#reject?.(deadlineError(call.#deadline));
  }

  /** A blocking command goes out as lifeline's copy of its arguments, whose timeout is shortened when written. */
  #shortening(args: Arg[]): Arg[] {
    if (!mayBlock(String(args[0]))) return args;
    const timeout = blockingTimeoutOf(String(args[0]), args.slice(1));
    const given = timeout === undefined ? undefined : args[timeout.index + 1];
    if (timeout === undefined || given === undefined) return args;
    const copy = [...args];
    shortening.set(copy, { timeout: { index: timeout.index + 1, unit: timeout.unit }, given, deadline: this.#deadline });
    return copy;
  }
}

function shortenOnWrite(original: Encode): Encode {
  return function encodeCommand(args: Arg[]): unknown {
    const shorten = typeof args === 'object' ? shortening.get(args) : undefined;
    if (shorten !== undefined) {
      const shortened = shortenedTimeout(shorten.given, shorten.timeout.unit, shorten.deadline.monotonicAt - monotonicNow());
      args[shorten.timeout.index] = shortened ?? shorten.given;
    }
    return original(args);
  };
}
