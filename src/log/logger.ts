import { createRequire } from 'node:module';

/** The slice of a pino logger lifeline writes to; any pino logger (or child) fits. */
export interface Logger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
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
