/**
 * The pg install: which files of pg and pg-pool are patched, and by which wrappers (each in a file
 * of its own beside this one).
 */
import { wrapMethods } from '../../hooks/index.js';
import type { DeadlinePolicyOptions } from '../../policy/index.js';
import type { Installed } from '../../install/index.js';
import { boundConnect } from './pg-connect.js';
import { driver } from './pg-driver.js';
import { boundNewClient, boundPoolConnect, boundRelease } from './pg-pool.js';
import { boundQuery } from './pg-query.js';

/**
 * Bounds node-postgres (`pg` 8) by the deadline in the OpenTelemetry context, or the policy's,
 * whichever is sooner — and so knex, Sequelize, TypeORM, MikroORM, Drizzle and Prisma's pg
 * adapter, which sit on it. In every phase: waiting for a connection from a `Pool` (exhausted), connecting (a
 * blackholed SYN), and waiting for the answer. At the deadline the caller gets a
 * `DeadlineExceededError` (through the library's own wrapper: `isDeadlineExceeded(err)` is true),
 * and the server's work ends too: a query already sent is cancelled with PostgreSQL's cancel
 * protocol (a second connection, as `psql`'s Ctrl-C), and its connection takes no other query until
 * the server has ended it; when the server does not confirm within 2 s the connection is closed, so
 * a pool never hands out a connection whose query may still be running. A query still queued on
 * its client is taken out of the queue. A call that ends first leaves no timer.
 *
 * It patches `pg/lib/client.js` and `pg-pool` in every copy the process has loaded or loads later
 * (CommonJS or ESM, before or after lifeline, with or without OpenTelemetry's pg instrumentation).
 * Policy rules match `db.system.name` (`postgresql`), `db.namespace`, `db.operation.name` (the
 * statement's first word: `SELECT`), `server.address` and `server.port`. Not covered: pg-native,
 * and submittables (`pg-cursor`, `pg-query-stream`), whose queries get no deadline.
 * @example
 * ```ts
 * installPgDeadlines({ policy: [{ match: { 'db.system.name': 'postgresql' }, timeoutMs: 5_000 }] });
 * await withTimeout(2_000, () => pool.query('SELECT * FROM orders WHERE id = $1', [id])); // ends by 2 s, on the server too
 * ```
 */
export function installPgDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  return driver.install(options, [
    {
      module: 'pg',
      file: 'lib/client.js',
      patch: (exports) =>
        wrapMethods((exports as { prototype?: object }).prototype, 'lifeline.pg', { query: boundQuery, connect: boundConnect }),
    },
    {
      module: 'pg-pool',
      file: 'index.js',
      patch: (exports) =>
        wrapMethods((exports as { prototype?: object }).prototype, 'lifeline.pg', {
          connect: boundPoolConnect,
          newClient: boundNewClient,
          _release: boundRelease,
        }),
    },
  ]);
}
