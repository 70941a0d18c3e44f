/**
 * What every node-postgres wrapper shares: the one install they read their policy from, the parts
 * of pg they touch, and the request attributes a policy matches. It imports none of its siblings,
 * so that each of them can import it without a cycle.
 */
import { operationOf } from '../sql.js';
import type { RequestAttributes } from '../../policy/index.js';
import { DriverInstall } from '../driver-install.js';

export type Callback = (error: unknown, result?: unknown) => void;

/** The parts of node-postgres' `Client` lifeline relies on (pg 8). */
export interface PgClient {
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
}
export interface PgQuery {
  callback?: Callback;
}
interface PgConnection {
  stream: { destroy(error?: Error): void; once(event: 'close', listener: () => void): void; destroyed?: boolean };
  connect(port: number | string, host?: string): void;
  cancel(processID: number, secretKey: number): void;
  on(event: string, listener: (...args: unknown[]) => void): void;
  once(event: string, listener: (...args: unknown[]) => void): void;
}
export interface PgPool {
  readonly ending?: boolean;
  readonly Promise: PromiseConstructor;
  readonly options: { host?: string; port?: number; database?: string };
  _pendingQueue?: { callback: unknown }[];
  _idle?: unknown[];
}

/** The one install of pg's wrappers: each reads `driver.policy` on every call. */
export const driver = new DriverInstall();

export function pgAttributes(
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

/** `Promise.withResolvers`, on the promise class the driver was configured with. */
export function promiseWith(Promise: PromiseConstructor): {
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
