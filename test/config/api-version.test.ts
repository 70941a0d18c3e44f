import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { apiCopyFrom, appApiMismatch } from '../../src/config/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** An app folder whose node_modules holds an @opentelemetry/api of `version` (package.json and entry point, as npm lays them out). */
function appWithApi(version: string | undefined): string {
  const dir = mkdtempSync(join(tmpdir(), 'lifeline-api-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'app.js'), '');
  if (version !== undefined) {
    const api = join(dir, 'node_modules/@opentelemetry/api');
    mkdirSync(join(api, 'build/src'), { recursive: true });
    writeFileSync(join(api, 'package.json'), JSON.stringify({ name: '@opentelemetry/api', version, main: 'build/src/index.js' }));
    writeFileSync(join(api, 'build/src/index.js'), '');
  }
  return join(dir, 'app.js');
}

describe("the app's own @opentelemetry/api against lifeline's", () => {
  const own = { version: '1.10.0', dir: '/lifeline/node_modules/@opentelemetry/api' };

  it('finds the version above the entry point, and nothing where there is no API', () => {
    expect(apiCopyFrom(appWithApi('1.7.0'))?.version).toBe('1.7.0');
    expect(apiCopyFrom(appWithApi(undefined))).toBeUndefined();
  });

  it('the same version: nothing to say', () => {
    expect(appApiMismatch(appWithApi('1.10.0'), own)).toBeUndefined();
  });

  it.each(['1.4.0', '1.7.0', '1.9.1'])(
    '%s: an older 1.x reads what lifeline registered; its own registrations are refused (info)',
    (version) => {
      const said = appApiMismatch(appWithApi(version), own);
      expect(said?.level).toBe('info');
      expect(said?.message).toContain('reads what lifeline');
    },
  );

  it.each(['1.11.0', '2.0.0'])('%s: a newer minor or another major is named, with what to do', (version) => {
    const said = appApiMismatch(appWithApi(version), own);
    expect(said?.level).toBe('warn');
    const line = said?.message;
    expect(line).toContain(`@opentelemetry/api ${version}`);
    expect(line).toContain('1.10.0');
    expect(line).toMatch(/pin the app's to 1\.10\.0/);
  });

  it('lifeline itself resolves an API copy (the one it registers globals with)', () => {
    expect(apiCopyFrom(join(process.cwd(), 'src/config/api-version.ts'))?.version).toMatch(/^1\.\d+\.\d+$/);
  });
});
