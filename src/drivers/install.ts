import { installed, type Installed } from '../install/index.js';
import { DeadlinePolicy, type DeadlinePolicyOptions } from '../policy/index.js';
import { installMongoDeadlines } from './mongodb/index.js';
import { installMysqlDeadlines } from './mysql/index.js';
import { installPgDeadlines } from './pg/index.js';
import { installRedisDeadlines } from './redis/index.js';

/**
 * Bounds the database and cache drivers an app uses by the deadline in the OpenTelemetry context,
 * or the policy's, whichever is sooner — the same rule as its HTTP calls — and ends the server's
 * work where the server can be told: node-postgres (`pg`, and the ORMs on it: a cancel request), the
 * `mongodb` driver (the remaining budget as `maxTimeMS`), mysql2 (MySQL and MariaDB, and the ORMs
 * on it: `KILL QUERY`), ioredis and node-redis (`redis`: a blocking
 * command's server-side wait shortened to the time left). Each driver is
 * patched in every copy loaded before or after this call; a driver the app does not use costs nothing.
 * `startLifeline` and register mode install it. Installing again puts the new options in force
 * until that install is uninstalled ({@link Installed}).
 * @example
 * ```ts
 * installDriverDeadlines({ defaultTimeoutMs: 10_000 });
 * await withTimeout(2_000, () => pool.query('SELECT …')); // ends by 2 s, on the server too
 * ```
 */
export function installDriverDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  new DeadlinePolicy(options); // a bad policy throws before any driver is patched
  const drivers = [
    installPgDeadlines(options),
    installMongoDeadlines(options),
    installRedisDeadlines(options),
    installMysqlDeadlines(options),
  ];
  return installed(() => {
    for (const driver of drivers.reverse()) driver.uninstall();
  });
}
