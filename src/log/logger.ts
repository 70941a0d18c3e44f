import { pino } from 'pino';

/** The slice of a pino logger lifeline writes to; any pino logger (or child) fits. */
export interface Logger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

let fallback: Logger | undefined;

/** lifeline's own pino logger, created on first use so that importing lifeline writes nothing. */
export function defaultLogger(): Logger {
  fallback ??= pino({ name: 'lifeline', level: 'info' });
  return fallback;
}
