/**
 * `Client#connect` under a deadline: a connect still under way at the deadline (a blackholed SYN,
 * a stuck startup) has its socket destroyed with the deadline's error.
 */
import { context } from '@opentelemetry/api';
import { armDeadline } from '../../policy/index.js';
import { deadlineError, driverDeadline, runUnderDeadline } from '../driver-deadline.js';
import { driver, pgAttributes, promiseWith, type Callback, type PgClient } from './pg-driver.js';

type Connect = (this: PgClient, ...args: unknown[]) => unknown;

export function boundConnect(original: Connect): Connect {
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
