import { createRequire } from 'node:module';
import { errorText } from '../errors/index.js';

/** The slice of a pino logger lifeline writes to; any pino logger (or child) fits. */
export interface Logger {
  /** Something failed and lifeline went on (see `logSwallowed`), or a setting was refused. */
  warn(obj: object, msg: string): void;
  /** What an operator wants to see: verdicts, a failing probe, a blocked event loop. */
  info(obj: object, msg: string): void;
  /** Dumps (the diagnostic, unless `diagnostics.log` is `'info'`). */
  debug(obj: object, msg: string): void;
}

let fallback: Logger | undefined;

/**
 * lifeline's own pino logger, created (and pino loaded) on first use: importing or starting
 * lifeline writes nothing and costs nothing until there is something to say.
 */
export function defaultLogger(): Logger {
  if (fallback === undefined) {
    const { pino } = createRequire(import.meta.url)('pino') as typeof import('pino');
    fallback = pino({ name: 'lifeline', level: 'info' });
  }
  return fallback;
}

/** `logger`, or one that turns into {@link defaultLogger} at its first line. */
export function loggerOrDefault(logger: Logger | undefined): Logger {
  return (
    logger ?? {
      warn: (obj, msg) => {
        defaultLogger().warn(obj, msg);
      },
      info: (obj, msg) => {
        defaultLogger().info(obj, msg);
      },
      debug: (obj, msg) => {
        defaultLogger().debug(obj, msg);
      },
    }
  );
}

/** Failures already logged, by logger and what failed: when each was last said. */
const said = new WeakMap<Logger, Map<string, number>>();
/** A failure that repeats is said again at most this often. */
const RESAY_MS = 60_000;

/**
 * The one policy for a failure lifeline catches so that the app goes on (a hook that threw, an
 * answer that could not be sent, a close that failed): said at WARN, as `lifeline: <what> failed`
 * with the error's message (never an object's contents), at most once a minute per `what`, so a
 * failure on a hot path cannot flood the log.
 */
export function logSwallowed(logger: Logger, what: string, error: unknown, fields: object = {}): void {
  let byWhat = said.get(logger);
  if (byWhat === undefined) {
    byWhat = new Map();
    said.set(logger, byWhat);
  }
  const now = Date.now();
  const last = byWhat.get(what);
  if (last !== undefined && now - last < RESAY_MS) return;
  byWhat.set(what, now);
  logger.warn({ ...fields, err: errorText(error) }, `lifeline: ${what} failed`);
}
