import type { Instrumentation } from '@opentelemetry/instrumentation';
import type { HttpInstrumentationConfig } from '@opentelemetry/instrumentation-http';
import type { UndiciInstrumentationConfig } from '@opentelemetry/instrumentation-undici';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LifelineError } from '../index.js';

const PACKAGE = '@opentelemetry/auto-instrumentations-node';

interface AutoInstrumentationsPackage {
  getNodeAutoInstrumentations(configs: Record<string, object>): Instrumentation[];
}

/**
 * Beside lifeline (an ordinary npm install) its ES module build, which shares lifeline's copies of
 * the OpenTelemetry packages; else (pnpm's strict layout) the copy the app's main module resolves,
 * whose CommonJS build loads copies of its own.
 */
async function load(): Promise<AutoInstrumentationsPackage | undefined> {
  const specifier: string = PACKAGE; // not a dependency of lifeline: resolved at run time only
  try {
    return (await import(specifier)) as AutoInstrumentationsPackage;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
  }
  try {
    const resolved = createRequire(process.argv[1] ?? join(process.cwd(), 'index.js')).resolve(PACKAGE);
    return (await import(pathToFileURL(resolved).href)) as AutoInstrumentationsPackage;
  } catch {
    return undefined;
  }
}

/**
 * `getNodeAutoInstrumentations()` of the app's copy of the auto-instrumentations package, with
 * lifeline's http and undici settings; `undefined` when the app does not have it and `required` is
 * false. The package reads `OTEL_NODE_ENABLED_INSTRUMENTATIONS` / `OTEL_NODE_DISABLED_INSTRUMENTATIONS`.
 */
export async function autoInstrumentations(http: HttpInstrumentationConfig, undici: UndiciInstrumentationConfig, required: boolean): Promise<Instrumentation[] | undefined> {
  const loaded = await load();
  if (loaded === undefined) {
    if (!required) return undefined;
    throw new LifelineError('ERR_INVALID_OPTION', `autoInstrumentations: true, but ${PACKAGE} is not installed where the app can import it (npm install ${PACKAGE})`);
  }
  return loaded.getNodeAutoInstrumentations({
    '@opentelemetry/instrumentation-http': http,
    '@opentelemetry/instrumentation-undici': undici,
  });
}
