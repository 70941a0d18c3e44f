/**
 * `node --import lifeline/register app.js`: instruments an unmodified service, configured by the
 * environment (SPEC §10). A misconfiguration stops start-up with a message naming the variable.
 */
import { readEnvConfig, type EnvConfig } from '../config/index.js';

let config: EnvConfig;
try {
  config = readEnvConfig();
} catch (err) {
  process.stderr.write(`lifeline: ${(err as Error).message}\n`);
  process.exit(1);
}

// Imported only once the environment is known to be valid: the process-wide catalog reads it on load.
const { startLifeline } = await import('../sdk/index.js');
const { pino } = await import('pino');
await startLifeline({
  probe: config.probe,
  ...(config.logLevel === undefined ? {} : { logger: pino({ name: 'lifeline', level: config.logLevel }) }),
});
