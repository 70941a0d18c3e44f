import { createRequire, syncBuiltinESMExports } from 'node:module';
import { whenFirstResolved } from '../hooks/index.js';

/**
 * An ES module that imported `node:http` before the SDK started (the SDK's own dependencies do)
 * fixed the module's named exports then; an app importing `{ request }` later would get that
 * unpatched view. Requiring the module lets OpenTelemetry's require hook patch it now, and
 * `syncBuiltinESMExports` brings every ES module view of it up to date. `node:https` (with TLS,
 * ~3.5 MB and some ms to load) the same, but only once the app resolves it: an ES module's import of
 * one of Node's modules never goes through `require`, where the hook would see it.
 * (`process.getBuiltinModule('https')` passes no hook: a process that gets https only that way
 * gets it unpatched, unless something else loaded it first.)
 */
export function syncBuiltinViews(): { stop(): void } {
  const require = createRequire(import.meta.url);
  require('http');
  syncBuiltinESMExports();
  const stop = whenFirstResolved(['https'], () => {
    require('https');
    syncBuiltinESMExports();
  });
  return { stop };
}
