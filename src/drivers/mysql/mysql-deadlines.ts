/**
 * The mysql2 install: which files of mysql2 are patched, and by which wrappers (each in a file of
 * its own beside this one).
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { wrapMethods } from '../../hooks/index.js';
import type { DeadlinePolicyOptions } from '../../policy/index.js';
import type { Installed } from '../../install/index.js';
import { boundAddCommand } from './mysql-connect.js';
import { driver, type AddCommand, type ConnectionMethod, type MysqlCopy } from './mysql-driver.js';
import { boundGetConnection, boundPoolQuery } from './mysql-pool.js';
import { boundQuery } from './mysql-query.js';

const KIND = 'lifeline.mysql2';

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
