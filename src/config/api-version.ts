import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** An `@opentelemetry/api` copy: its version, and the folder it is in. */
export interface ApiCopy {
  version: string;
  dir: string;
}

/**
 * The `@opentelemetry/api` that a module at `from` (a file path) imports, or `undefined` if it has
 * none. Read from the package's own package.json, found above its entry point (api 1.10 does not
 * export `./package.json`).
 */
export function apiCopyFrom(from: string): ApiCopy | undefined {
  let dir: string;
  try {
    dir = dirname(createRequire(from).resolve('@opentelemetry/api'));
  } catch {
    return undefined;
  }
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === '@opentelemetry/api' && typeof pkg.version === 'string') return { version: pkg.version, dir };
    } catch {
      // no package.json here: look further up
    }
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/**
 * What the app's own `@opentelemetry/api` (the copy its main module `appMain` imports) makes of the
 * globals lifeline registered with its own copy `own`, when it is another version; else
 * `undefined`. The API reads globals registered by a copy of its own major and of its own minor or
 * a newer one, and refuses every registration from a copy of another version: an app on an older
 * 1.x works, but its own `set*` calls (diag.setLogger, a propagator, a meter provider) are refused
 * (`info`); one on a newer minor, or another major, would have its own spans go nowhere (`warn`).
 */
export function appApiMismatch(
  appMain: string,
  own: ApiCopy | undefined = apiCopyFrom(import.meta.filename),
): { level: 'warn' | 'info'; message: string } | undefined {
  const app = apiCopyFrom(appMain);
  if (app === undefined || own === undefined || app.dir === own.dir || app.version === own.version) return undefined;
  const [appMajor, appMinor] = app.version.split('.').map(Number);
  const [ownMajor, ownMinor] = own.version.split('.').map(Number);
  if (appMajor === ownMajor && appMinor !== undefined && ownMinor !== undefined && appMinor <= ownMinor)
    return {
      level: 'info',
      message: `the app's @opentelemetry/api ${app.version} (${app.dir}) reads what lifeline's ${own.version} registered, but OpenTelemetry refuses the app's own registrations (diag.setLogger, setGlobalPropagator, setGlobalMeterProvider…) from another version: use @opentelemetry/api ${own.version} if the app makes any`,
    };
  return {
    level: 'warn',
    message: `the app's @opentelemetry/api ${app.version} (${app.dir}) does not accept what lifeline's ${own.version} registered: the app's own spans and context would go nowhere (lifeline's deadlines, probes and its own spans still work); use an otel-lifeline built with @opentelemetry/api ${app.version} or newer, or pin the app's to ${own.version}`,
  };
}
