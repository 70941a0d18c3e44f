import type { DeadlinePolicyOptions } from '../../policy/index.js';
import { installed, type Installed } from '../../install/index.js';
import { installIoredisDeadlines } from './ioredis-deadlines.js';
import { installNodeRedisDeadlines } from './node-redis-deadlines.js';

export { installIoredisDeadlines } from './ioredis-deadlines.js';
export { installNodeRedisDeadlines } from './node-redis-deadlines.js';

/**
 * Bounds both Redis clients, ioredis and node-redis (`redis`, `@redis/client`), by the deadline in
 * the OpenTelemetry context or the policy's, whichever is sooner: the caller's command rejects
 * with a `DeadlineExceededError` at the deadline whether it is queued (connecting, reconnecting)
 * or waiting for its reply, and the connection stays correct (a late reply is discarded). The
 * server's end, for Redis: a blocking command (`BLPOP key 0`, `XREAD BLOCK 0`, `WAIT`, …) is sent
 * with its timeout shortened to the time left, so the server stops blocking the connection just
 * after the deadline. See {@link installIoredisDeadlines} and {@link installNodeRedisDeadlines}.
 * @example
 * ```ts
 * installRedisDeadlines({ policy: [{ match: { 'db.system.name': 'redis' }, timeoutMs: 1_000 }] });
 * await withTimeout(300, () => redis.blpop('jobs', 0)); // rejects at 300 ms; the server stops waiting just after
 * ```
 */
export function installRedisDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  const clients = [installIoredisDeadlines(options), installNodeRedisDeadlines(options)];
  return installed(() => {
    for (const client of clients.reverse()) client.uninstall();
  });
}
