import type { Instrumentation } from '@opentelemetry/instrumentation';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { LifelineError } from '../index.js';
import { errorText } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import { autoInstrumentationsDeferred, DeferredInstrumentations, type AutoInstrumentations } from './deferred-instrumentations.js';

const PACKAGE = '@opentelemetry/auto-instrumentations-node';

export interface AutoInstrumentationsPackage {
  /**
   * The package's `getNodeAutoInstrumentations(configs)`: those of Node's own modules made now,
   * those of libraries when the app first loads one (see {@link autoInstrumentationsDeferred}).
   */
  instrumentations(configs: Record<string, object>, logger: Logger): AutoInstrumentations;
  /** Where it was loaded from (a file path): its instrumentations use the OpenTelemetry packages found from there. */
  from: string;
}

/**
 * The copy found from lifeline's own folder (the app's, in an ordinary npm install: lifeline bundles
 * no auto-instrumentations); else (pnpm's strict layout) the copy the app's main module resolves.
 * Its CommonJS build, which is what lets its instrumentations wait (`autoInstrumentationsDeferred`).
 */
function load(): AutoInstrumentationsPackage | undefined {
  const entry = resolveFrom(import.meta.filename) ?? resolveFrom(process.argv[1] ?? join(process.cwd(), 'index.js'));
  if (entry === undefined) return undefined;
  return {
    instrumentations: (configs, logger) => {
      try {
        return autoInstrumentationsDeferred(entry, configs, logger);
      } catch (err) {
        // A package shaped otherwise than the one lifeline knows (or a broken install, which loading
        // it as it is then says): loaded as it is, everything made now. Nothing was made before.
        logger.debug({ err: errorText(err) }, 'lifeline: the auto-instrumentations are all made at start-up');
        return { now: loadAsItIs(entry).getNodeAutoInstrumentations(configs), deferred: new DeferredInstrumentations([], () => undefined) };
      }
    },
    from: entry,
  };
}

function resolveFrom(file: string): string | undefined {
  try {
    return createRequire(file).resolve(PACKAGE);
  } catch (err) {
    // Only the package itself missing means "not installed"; anything else is a broken install, said as it is.
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && (err as Error).message.includes(`'${PACKAGE}'`)) return undefined;
    throw broken(err);
  }
}

function loadAsItIs(entry: string): { getNodeAutoInstrumentations(configs: Record<string, object>): Instrumentation[] } {
  try {
    return createRequire(entry)(entry) as { getNodeAutoInstrumentations(configs: Record<string, object>): Instrumentation[] };
  } catch (err) {
    throw broken(err);
  }
}

function broken(err: unknown): LifelineError {
  const why = errorText(err);
  return new LifelineError(
    'ERR_INVALID_OPTION',
    `${PACKAGE} is installed but cannot be loaded (${why}): repair the install, or turn it off (autoInstrumentations: false, LIFELINE_AUTO_INSTRUMENTATIONS=off)`,
    { cause: err },
  );
}

/**
 * The app's copy of the auto-instrumentations package; `undefined` when the app does not have it
 * and `required` is false. Its `getNodeAutoInstrumentations` reads
 * `OTEL_NODE_ENABLED_INSTRUMENTATIONS` / `OTEL_NODE_DISABLED_INSTRUMENTATIONS` itself.
 */
export function autoInstrumentations(required: boolean): AutoInstrumentationsPackage | undefined {
  const loaded = load();
  if (loaded === undefined && required)
    throw new LifelineError(
      'ERR_INVALID_OPTION',
      `autoInstrumentations: true, but ${PACKAGE} is not installed where the app can import it (npm install ${PACKAGE})`,
    );
  return loaded;
}
