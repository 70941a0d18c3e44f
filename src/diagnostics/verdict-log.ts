import type { Logger } from '../log/index.js';
import { count } from './describe.js';
import type { DiagnosticSnapshot } from './types.js';

/**
 * A verdict in the log: who is unhealthy at INFO, always (a service without tracing still learns
 * it), and the whole snapshot, trees and process view, at `level` (DEBUG by default: it is long).
 */
export function logVerdict(logger: Logger, level: 'debug' | 'info', snapshot: DiagnosticSnapshot): void {
  logger.info(
    { unhealthy: snapshot.unhealthy, inFlight: snapshot.components.reduce((n, c) => n + count(c.inFlight), 0) },
    'health verdict: unhealthy components',
  );
  logger[level](
    {
      diagnostic: {
        components: JSON.parse(JSON.stringify(snapshot.components)) as unknown,
        process: snapshot.process,
        evicted: snapshot.evicted,
      },
    },
    'health diagnostic',
  );
}
