/**
 * What every mysql2 wrapper shares: the one install they read their policy from, the parts of
 * mysql2 they touch, and the request attributes a policy matches. It imports none of its siblings,
 * so that each of them can import it without a cycle.
 */
import type { RequestAttributes } from '../../policy/index.js';
import { operationOf } from '../sql.js';
import { DriverInstall } from '../driver-install.js';

export type Callback = (error: unknown, ...results: unknown[]) => void;

/** mysql2's `RingQueue` (`lib/ring_queue.js`), the queue of a connection's commands and of a pool's waiters. */
interface RingQueue<T> {
  readonly length: number;
  get(index: number): T | undefined;
  removeOne(index: number): unknown;
  shift(): T | undefined;
}
/** A command of mysql2's (`lib/commands/*.js`): an EventEmitter that emits 'end' once the server's answer is read. */
export interface MysqlCommand {
  onResult?: Callback | undefined;
  sql?: string;
  once(event: 'end', listener: () => void): unknown;
  emit(event: 'end'): boolean;
}
export interface MysqlConfig {
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
export interface MysqlConnection {
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
export interface MysqlPool {
  readonly config: { readonly connectionConfig: MysqlConfig };
  readonly _closed: boolean;
  readonly _connectionQueue: RingQueue<unknown>;
  readonly _freeConnections: RingQueue<MysqlConnection>;
  readonly _allConnections: RingQueue<MysqlConnection>;
}
/** One loaded copy of mysql2: its own classes, for the commands lifeline makes and recognises. */
export interface MysqlCopy {
  readonly BaseConnection: {
    new (options: { config: MysqlConfig }): MysqlConnection;
    readonly prototype: { readonly addCommand: AddCommand };
  };
  readonly Query: new (options: { sql: string }, callback: Callback) => MysqlCommand;
  readonly ClientHandshake: abstract new (...args: never[]) => MysqlCommand;
}

export type ConnectionMethod = (this: MysqlConnection, ...args: unknown[]) => unknown;
export type AddCommand = (this: MysqlConnection, command: MysqlCommand) => MysqlCommand;

/** The one install of mysql2's wrappers: each reads `driver.policy` on every call. */
export const driver = new DriverInstall();

/** The SQL of a `query`/`execute` first argument: a string, an options object or a `Query` command. */
export function textOf(sql: unknown): unknown {
  return typeof sql === 'object' && sql !== null ? (sql as { sql?: unknown }).sql : sql;
}

export function mysqlAttributes(config: MysqlConfig, mariadb: boolean | undefined, text?: unknown): RequestAttributes {
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
