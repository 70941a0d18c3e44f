import { context } from '@opentelemetry/api';
import { contextWithoutDeadline, monotonicNow, type DeadlineWatch } from '../../deadline/index.js';
import { wrapMethod } from '../../hooks/index.js';
import { armDeadline, noAttributes, type CallDeadline, type DeadlinePolicyOptions, type RequestAttributes } from '../../policy/index.js';
import { applyUnderDeadline, deadlineError, driverDeadline } from '../driver-deadline.js';
import type { Installed } from '../../install/index.js';
import { DriverInstall } from '../driver-install.js';
import { blockingTimeoutOf, endedByDeadline, mayBlock, shortenedTimeout, type BlockingTimeout } from './blocking-timeout.js';

type Arg = string | Buffer;

/** The parts of ioredis' `Command` lifeline relies on (ioredis 5 and 6). */
interface IoCommand {
  readonly name: string;
  args: Arg[];
  readonly promise: Promise<unknown>;
  readonly isSettled?: boolean;
  resolve: (value: unknown) => unknown;
  reject: (error: unknown) => void;
  toWritable: (this: IoCommand, socket: unknown) => unknown;
  constructor: { checkFlag?(flag: string, name: string): boolean };
  [CALL]?: CommandCall;
}
/** A queued command, as ioredis keeps it in its offline queues (`denque`). */
interface QueueItem {
  readonly command: IoCommand;
}
interface Queue {
  readonly length: number;
  peekAt(index: number): QueueItem | undefined;
  removeOne(index: number): unknown;
}
/** A `Redis` connection or a `Cluster`. */
interface IoClient {
  readonly status: string;
  readonly options: { host?: string; port?: number; path?: string; db?: number };
  readonly condition?: { select?: number; handshake?: boolean } | null;
  readonly isCluster?: boolean;
  readonly offlineQueue?: Queue;
}
type SendCommand = (this: IoClient, command: IoCommand | undefined, ...rest: unknown[]) => unknown;
/** ioredis' `Pipeline` (explicit, `multi`, and auto-pipelining's): commands are added in their caller's context, sent at `exec`. */
interface IoPipeline {
  readonly redis: IoClient;
}
type AddToPipeline = (this: IoPipeline, command: IoCommand | undefined) => unknown;
type Connect = (this: IoClient, ...args: unknown[]) => unknown;

/** The deadline a command carries, on the command itself: it passes through `sendCommand` more than once. */
const CALL = Symbol('lifeline.ioredis.call');

const driver = new DriverInstall();

/**
 * Bounds ioredis (5 and 6: `Redis` and `Cluster`, and BullMQ and the like, which sit on it) by the
 * deadline in the OpenTelemetry context, or the policy's, whichever is sooner. In every phase: in
 * the offline queue (not yet connected, connecting to a server that never answers, reconnecting),
 * and waiting for the reply. At the deadline the caller's command rejects with a
 * `DeadlineExceededError`; a command never written leaves the offline queue and is never sent. A
 * command already written stays in ioredis' queue until its reply arrives, which is then
 * discarded: replies never shift onto the commands behind it. A command that ends first leaves no timer.
 *
 * The server's end, for Redis: a blocking command (`BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`,
 * `BZPOPMIN`/`MAX`, `BLMPOP`, `BZMPOP`, `XREAD`/`XREADGROUP … BLOCK`, `WAIT`, `WAITAOF`) is written
 * with its timeout shortened to the time left (rounded up to the millisecond; `0`, forever,
 * included), so the server stops blocking the connection just after the deadline, and the
 * commands behind it run. Redis 6 or later (earlier versions take whole seconds only). The caller
 * still gets the `DeadlineExceededError` at the deadline, not the server's nil reply.
 *
 * Pipelines and `multi` are bound per command (each gets the deadline in force when `exec` is
 * called): `exec` of a pipeline resolves at the deadline with a `DeadlineExceededError` for each
 * command still waiting, `multi().exec()` rejects with it. A pipeline is written as a whole, so its
 * commands are sent even after their deadline (their replies are discarded). ioredis' own
 * handshake (`AUTH`, `HELLO`, `SELECT`, `INFO` ready check) is not bound, and the connection is
 * made outside the caller's deadline: a connection outlives the command that opened it.
 *
 * Policy rules match `db.system.name` (`redis`), `db.namespace` (the db index, `"0"`),
 * `db.operation.name` (the command, upper-case: `GET`), `server.address` and `server.port` (not
 * for a `Cluster`, which has no single server).
 * @example
 * ```ts
 * installIoredisDeadlines({ policy: [{ match: { 'db.operation.name': 'GET' }, timeoutMs: 50 }] });
 * await withTimeout(300, () => redis.blpop('jobs', 0)); // DeadlineExceededError at 300 ms; the server stops waiting too
 * ```
 */
export function installIoredisDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  const patchClass = (exports: unknown): (() => void) | undefined => {
    const prototype = (exports as { default?: { prototype?: object } }).default?.prototype;
    if (prototype === undefined) return undefined;
    const undo = [
      wrapMethod<SendCommand>(prototype, 'sendCommand', 'lifeline.ioredis', boundSendCommand),
      wrapMethod<Connect>(prototype, 'connect', 'lifeline.ioredis', connectWithoutDeadline),
    ];
    return () => {
      for (const restore of undo) restore?.();
    };
  };
  return driver.install(options, [
    { module: 'ioredis', file: 'built/Redis.js', patch: patchClass },
    { module: 'ioredis', file: 'built/cluster/index.js', patch: patchClass },
    {
      module: 'ioredis',
      file: 'built/Pipeline.js',
      patch(exports) {
        const prototype = (exports as { default?: { prototype?: object } }).default?.prototype;
        return prototype === undefined
          ? undefined
          : wrapMethod<AddToPipeline>(prototype, 'sendCommand', 'lifeline.ioredis', boundAddToPipeline);
      },
    },
  ]);
}

function ioredisAttributes(client: IoClient, command: IoCommand): RequestAttributes {
  const attributes: Record<string, string | number> = {
    'db.system.name': 'redis',
    'db.operation.name': command.name.toUpperCase(),
    'db.namespace': String(client.condition?.select ?? client.options.db ?? 0),
  };
  if (client.isCluster !== true) {
    const { path, host, port } = client.options;
    attributes['server.address'] = path ?? host ?? 'localhost';
    if (path === undefined) attributes['server.port'] = port ?? 6379;
  }
  return attributes;
}

/** ioredis writes its own handshake commands while the connection is in its handshake: they are not the caller's. */
function isHandshake(client: IoClient, command: IoCommand): boolean {
  return (
    client.status === 'connect' &&
    client.condition?.handshake === true &&
    command.constructor.checkFlag?.('HANDSHAKE_COMMANDS', command.name) === true
  );
}

function boundSendCommand(original: SendCommand): SendCommand {
  return function sendCommand(this: IoClient, ...args: Parameters<SendCommand>): unknown {
    const command = args[0];
    if (typeof command !== 'object') return Reflect.apply(original, this, args);
    const bound = command[CALL];
    if (bound !== undefined) {
      // Again: flushed from an offline queue, resent after a reconnect, or a Cluster handing it to a node.
      bound.client = this;
      // Ended by its deadline while queued: not sent at all (a pipeline's command is: it is written with the rest).
      if (bound.expired && args[1] === undefined) return command.promise;
      return applyUnderDeadline(bound.deadline, context.active(), original, this, args);
    }
    const rules = driver.policy;
    if (rules === undefined || isHandshake(this, command)) return Reflect.apply(original, this, args);
    const active = context.active();
    const deadline = driverDeadline(rules, rules.hasRules ? attributesOf(this, command) : noAttributes, active);
    if (deadline === undefined) return Reflect.apply(original, this, args);
    const call = new CommandCall(command, deadline, this, args[1] !== undefined);
    command[CALL] = call;
    const result = applyUnderDeadline(deadline, active, original, this, args);
    call.arm();
    return result;
  };
}

/** The attributes of `command`, when a rule asks; made apart from the wrappers, which then need no closure of their own. */
function attributesOf(client: IoClient, command: IoCommand): () => RequestAttributes {
  return () => ioredisAttributes(client, command);
}

/**
 * A command added to a pipeline gets the deadline of the caller adding it: with auto-pipelining,
 * callers' commands share a pipeline that one of them happens to `exec`.
 */
function boundAddToPipeline(original: AddToPipeline): AddToPipeline {
  return function sendCommand(this: IoPipeline, command: IoCommand | undefined): unknown {
    const rules = driver.policy;
    if (rules === undefined || typeof command !== 'object' || command[CALL] !== undefined) return original.call(this, command);
    const deadline = driverDeadline(rules, rules.hasRules ? attributesOf(this.redis, command) : noAttributes);
    if (deadline === undefined) return original.call(this, command);
    const call = new CommandCall(command, deadline, this.redis, true);
    command[CALL] = call;
    const result = original.call(this, command);
    call.arm();
    return result;
  };
}

/** A connection outlives the command that opened it: its handshake, ready check and reconnects carry no caller's deadline. */
function connectWithoutDeadline(original: Connect): Connect {
  return function connect(this: IoClient, ...args: unknown[]): unknown {
    const active = context.active();
    const detached = contextWithoutDeadline(active);
    return detached === active ? Reflect.apply(original, this, args) : context.with(detached, () => Reflect.apply(original, this, args));
  };
}

/** One command under a deadline: rejects its caller at the deadline unless the reply came first. */
class CommandCall {
  readonly #command: IoCommand;
  readonly deadline: CallDeadline;
  readonly #inPipeline: boolean;
  /** Where the command was queued last (a Cluster hands it to a node's connection). */
  client: IoClient;
  #origin: IoClient;
  #timer: DeadlineWatch | undefined;
  /** Whether the server's wait was shortened to the deadline (a blocking command). */
  #shortened = false;
  expired = false;

  constructor(command: IoCommand, deadline: CallDeadline, client: IoClient, inPipeline: boolean) {
    this.#command = command;
    this.deadline = deadline;
    this.client = client;
    this.#origin = client;
    this.#inPipeline = inPipeline;
    if (mayBlock(command.name)) this.#shortenOnWrite();
  }

  /** Arms the deadline, and disarms it when the command settles (ioredis and OpenTelemetry replace these, so they are read at each call). */
  arm(): void {
    const command = this.#command;
    if (command.isSettled === true) return; // refused at once (the connection ended)
    const { resolve, reject } = command;
    command.resolve = (value) => {
      this.#timer?.cancel();
      // The shortened wait ran out: the deadline's, before its timer fired.
      if (this.#shortened && endedByDeadline(value, this.deadline.monotonicAt, monotonicNow())) {
        this.expired = true;
        reject(deadlineError(this.deadline));
        return undefined;
      }
      return resolve(value);
    };
    command.reject = (error) => {
      this.#timer?.cancel();
      reject(error);
    };
    this.#timer = armDeadline<CommandCall>(this.deadline, CommandCall.#expire, this);
  }

  static #expire(call: CommandCall): void {
    const command = call.#command;
    if (command.isSettled === true) return;
    call.expired = true;
    // A pipeline is written in one piece once all of its commands are: one taken out would hold back the rest.
    if (!call.#inPipeline) {
      leaveQueue(call.client.offlineQueue, command);
      if (call.#origin !== call.client) leaveQueue(call.#origin.offlineQueue, command);
    }
    command.reject(deadlineError(call.deadline));
  }

  /**
   * Blocking commands are written with the server's wait shortened to the time left then (a
   * command may wait in the offline queue first). The arguments as the caller gave them are kept
   * for a resend after a reconnect.
   */
  #shortenOnWrite(): void {
    const command = this.#command;
    const timeout = blockingTimeoutOf(command.name, command.args);
    if (timeout === undefined) return;
    const given = command.args[timeout.index];
    if (given === undefined) return;
    const prototypeWrite = command.toWritable;
    const deadline = this.deadline;
    this.#shortened = true;
    command.toWritable = function toWritable(this: IoCommand, socket: unknown): unknown {
      shorten(this, timeout, given, deadline);
      return prototypeWrite.call(this, socket);
    };
  }
}

function shorten(command: IoCommand, timeout: BlockingTimeout, given: Arg, deadline: CallDeadline): void {
  const shortened = shortenedTimeout(given, timeout.unit, deadline.monotonicAt - monotonicNow());
  command.args[timeout.index] = shortened ?? given;
}

/** Takes `command` out of an offline queue; the oldest expire first, so it is found near the head. */
function leaveQueue(queue: Queue | undefined, command: IoCommand): void {
  if (queue === undefined || typeof queue.peekAt !== 'function') return;
  for (let index = 0; index < queue.length; index++) {
    if (queue.peekAt(index)?.command === command) {
      queue.removeOne(index);
      return;
    }
  }
}
