import type { Instrumentation } from '@opentelemetry/instrumentation';
import { createRequire, register as registerLoader } from 'node:module';
import { pathToFileURL } from 'node:url';

/** How the ESM loader hook was installed, for the start-up log line and the tests. */
export type EsmHookMode = 'sync' | 'async' | 'off';

/**
 * The module names `instrumentations` patch: the hook's include list. import-in-the-middle then
 * wraps only these modules, instead of rewriting every module the app imports (which costs
 * start-up time and, for some import graphs with cycles, breaks them: `tap` did).
 */
export function instrumentedModules(instrumentations: readonly Instrumentation[]): string[] {
  const names = new Set<string>();
  for (const instrumentation of instrumentations) {
    const definitions = (instrumentation as { getModuleDefinitions?: () => readonly { name: string }[] }).getModuleDefinitions?.() ?? [];
    for (const { name } of definitions) names.add(name);
  }
  return [...names].sort();
}

/**
 * Lets OpenTelemetry's instrumentations patch modules an ES module app imports. Prefers the
 * in-thread `module.registerHooks` loader where the Node version supports it (no loader thread:
 * faster start-up, less memory), else the off-thread `module.register` one. The loader is
 * import-in-the-middle, resolved from the `@opentelemetry/instrumentation` that `from` (a file of
 * the package whose instrumentations patch the modules: the app's auto-instrumentations, or
 * lifeline) finds, so that it is the copy whose `Hook` registrations those instrumentations make;
 * lifeline's own copy if that one has no loader to offer.
 */
export async function installEsmHook(include: readonly string[], from: string = import.meta.filename): Promise<EsmHookMode> {
  try {
    return await installFrom(from, include);
  } catch (err) {
    if (from === import.meta.filename) throw err;
    return installFrom(import.meta.filename, include);
  }
}

async function installFrom(from: string, include: readonly string[]): Promise<EsmHookMode> {
  // lifeline's own instrumentations are bundled with the @opentelemetry/instrumentation they use,
  // which imports import-in-the-middle from lifeline's own dependencies: the loader must be that copy.
  const fromInstrumentation =
    from === import.meta.filename ? createRequire(from) : createRequire(createRequire(from).resolve('@opentelemetry/instrumentation'));
  const loaderUrl = (file: string): string => pathToFileURL(fromInstrumentation.resolve(`import-in-the-middle/${file}`)).href;
  const sync = (await import(loaderUrl('supports-sync-hooks.mjs'))) as { supportsSyncHooks(): boolean };
  if (sync.supportsSyncHooks()) {
    const hooks = (await import(loaderUrl('register-hooks.mjs'))) as { register(options: { include: string[] }): void };
    hooks.register({ include: [...include] });
    return 'sync';
  }
  // module.register is deprecated in favour of registerHooks, used above where it works.
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  registerLoader(loaderUrl('hook.mjs'), import.meta.url, { data: { include: [...include] } });
  return 'async';
}
