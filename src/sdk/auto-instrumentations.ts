import type { Instrumentation } from '@opentelemetry/instrumentation';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { LifelineError } from '../index.js';
import { errorText } from '../errors/index.js';

const PACKAGE = '@opentelemetry/auto-instrumentations-node';

export interface AutoInstrumentationsPackage {
  getNodeAutoInstrumentations(configs: Record<string, object>): Instrumentation[];
  /** Where it was loaded from (a file path): its instrumentations use the OpenTelemetry packages found from there. */
  from: string;
}

/**
 * The copy found from lifeline's own folder (the app's, in an ordinary npm install: lifeline bundles
 * no auto-instrumentations), its ES module build; else (pnpm's strict layout) the copy the app's
 * main module resolves, its CommonJS build.
 */
async function load(): Promise<AutoInstrumentationsPackage | undefined> {
  const specifier: string = PACKAGE; // not a dependency of lifeline: resolved at run time only
  try {
    const loaded = (await import(specifier)) as Omit<AutoInstrumentationsPackage, 'from'>;
    return { getNodeAutoInstrumentations: loaded.getNodeAutoInstrumentations, from: fileURLToPath(import.meta.resolve(specifier)) };
  } catch (err) {
    // Only the package itself missing means "not installed"; a dependency of it missing is a broken install, said as it is.
    if (!notFound(err)) throw broken(err);
  }
  let resolved: string;
  try {
    resolved = createRequire(process.argv[1] ?? join(process.cwd(), 'index.js')).resolve(PACKAGE);
  } catch {
    return undefined;
  }
  try {
    const loaded = (await import(pathToFileURL(resolved).href)) as Omit<AutoInstrumentationsPackage, 'from'>;
    return { getNodeAutoInstrumentations: loaded.getNodeAutoInstrumentations, from: resolved };
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

function notFound(err: unknown): boolean {
  const { code, message } = err as NodeJS.ErrnoException;
  return code === 'ERR_MODULE_NOT_FOUND' && message.includes(`'${PACKAGE}'`);
}

/**
 * The app's copy of the auto-instrumentations package; `undefined` when the app does not have it
 * and `required` is false. Its `getNodeAutoInstrumentations` reads
 * `OTEL_NODE_ENABLED_INSTRUMENTATIONS` / `OTEL_NODE_DISABLED_INSTRUMENTATIONS` itself.
 */
export async function autoInstrumentations(required: boolean): Promise<AutoInstrumentationsPackage | undefined> {
  const loaded = await load();
  if (loaded === undefined && required)
    throw new LifelineError(
      'ERR_INVALID_OPTION',
      `autoInstrumentations: true, but ${PACKAGE} is not installed where the app can import it (npm install ${PACKAGE})`,
    );
  return loaded;
}
