/**
 * The packed tarball: what it holds, and that `npm install <tarball>` into an empty service gives a
 * working register mode, library and CLI.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ROOT } from '../support/node.js';
import { describeRun, freePort, removeDir, run, serviceEnv } from './support.js';

interface Manifest {
  exports: Record<string, string | { types: string; default: string }>;
  bin: Record<string, string>;
}

describe('the npm package (npm pack)', () => {
  let files: string[] = [];

  beforeAll(async () => {
    const list = await run('tar', ['-tzf', inject('lifelineTarball')], { cwd: ROOT, env: serviceEnv(), timeoutMs: 30_000 });
    expect(list.code, describeRun('tar -tzf', list)).toBe(0);
    files = list.stdout
      .split('\n')
      .filter(Boolean)
      .map((file) => file.replace(/^package\//, ''));
  });

  it('holds dist, README and package.json (and LICENSE when the repository has one), and its bundled dependencies, nothing else', async () => {
    expect(files).toContain('package.json');
    expect(files).toContain('README.md');
    if (existsSync(join(ROOT, 'LICENSE'))) expect(files).toContain('LICENSE');
    const outside = files.filter(
      (file) => !file.startsWith('dist/') && !file.startsWith('node_modules/') && !['package.json', 'README.md', 'LICENSE'].includes(file),
    );
    expect(outside).toEqual([]);
    // Every dependency travels inside the tarball (npm then never fits them into an app's tree), and
    // no development tool with them.
    const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
      bundleDependencies: string[];
    };
    expect([...manifest.bundleDependencies].sort()).toEqual(Object.keys(manifest.dependencies).sort());
    const packed = new Set(
      files.filter((file) => /^node_modules\/(@[^/]+\/)?[^/]+\/package\.json$/.test(file)).map((file) => file.slice(13, -13)),
    );
    for (const name of Object.keys(manifest.dependencies)) expect(packed, name).toContain(name);
    for (const tool of ['vitest', 'typescript', 'eslint', 'prettier', 'node', 'pg', 'ioredis']) expect(packed, tool).not.toContain(tool);
  });

  it('holds no tests, TypeScript sources, caches or local state of its own', () => {
    const unwanted = files
      .filter((file) => !file.startsWith('node_modules/'))
      .filter(
        (file) =>
          /(^|\/)(test|tests|__tests__|fixtures|\.cache|node_modules|\.git)\//.test(file) ||
          /\.test\.[cm]?[jt]s$/.test(file) ||
          (/\.[cm]?ts$/.test(file) && !/\.d\.[cm]?ts$/.test(file)) ||
          /\.(tgz|log|tsbuildinfo)$/.test(file) ||
          /(^|\/)\.env/.test(file),
      );
    expect(unwanted).toEqual([]);
  });

  it('every entry point of package.json (exports, bin) is in it, with its types', async () => {
    const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as Manifest;
    for (const [entry, target] of Object.entries(manifest.exports)) {
      const targets = typeof target === 'string' ? [target] : [target.types, target.default];
      for (const path of targets) expect(files, `exports["${entry}"]`).toContain(path.replace(/^\.\//, ''));
    }
    for (const path of Object.values(manifest.bin)) expect(files).toContain(path.replace(/^\.\//, ''));
  });

  it('ships the bundle only: its entry points and the chunks something shipped imports (a stale dist would publish dead modules)', async () => {
    const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as Manifest;
    const entries = [
      ...Object.values(manifest.exports)
        .map((target) => (typeof target === 'string' ? target : target.default))
        .filter((path) => path.endsWith('.js')),
      ...Object.values(manifest.bin),
      './dist/watchdog/watchdog-worker.js', // started by path as the watchdog thread
    ].map((path) => path.replace(/^\.\//, ''));
    const scripts = files.filter((file) => file.startsWith('dist/') && /\.c?js$/.test(file));
    // lifeline's own undici, loaded by path (without them it would quietly fall back to the package).
    expect(scripts).toEqual(expect.arrayContaining(['dist/_chunks/undici.cjs', 'dist/_chunks/undici-symbols.cjs']));
    expect(scripts.filter((file) => !file.startsWith('dist/_chunks/')).sort()).toEqual([...new Set(entries)].sort());
    const texts = await Promise.all(scripts.map((file) => readFile(join(ROOT, file), 'utf8')));
    const unused = scripts
      .filter((file) => file.startsWith('dist/_chunks/'))
      .filter((chunk) => !texts.some((text) => text.includes(`/${chunk.slice('dist/_chunks/'.length)}`)));
    expect(unused, 'rebuild from a clean dist/ (rm -rf dist && npm run build) before packing').toEqual([]);
    expect(scripts.length).toBeGreaterThan(entries.length);
  });
});

describe('npm install <tarball> into an empty service', () => {
  let dir: string | undefined;
  let service = '';

  beforeAll(async () => {
    service = await mkdtemp(join(tmpdir(), 'lifeline-adoption-empty-'));
    dir = service;
    await writeFile(join(service, 'package.json'), JSON.stringify({ name: 'empty-service', version: '1.0.0', private: true }, null, 2));
    const install = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', inject('lifelineTarball')], {
      cwd: service,
      env: serviceEnv(),
      timeoutMs: 240_000,
    });
    expect(install.code, describeRun('npm install <tarball>', install)).toBe(0);
    console.log(`empty service: npm install <tarball> ${install.ms} ms`);
  });
  afterAll(() => removeDir(dir));

  it('node --import otel-lifeline/register -e "…" runs the script with the probe server up, then exits by itself', async () => {
    const probePort = await freePort();
    const script = `
      const http = require('node:http');
      http.get('http://127.0.0.1:' + process.env.LIFELINE_PROBE_PORT + '/live', (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk) => (body += chunk)).on('end', () => console.log('probe', res.statusCode, body));
      });`;
    const result = await run(process.execPath, ['--import', 'otel-lifeline/register', '-e', script], {
      cwd: service,
      env: serviceEnv({ LIFELINE_PROBE_PORT: String(probePort), OTEL_TRACES_EXPORTER: 'none' }),
      timeoutMs: 20_000,
    });
    expect(result.code, describeRun('node --import otel-lifeline/register -e', result)).toBe(0);
    expect(result.stdout).toContain('probe 200 {"status":"pass"');
  });

  it('the library and its subpaths import from ESM and CommonJS', async () => {
    const esm = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      import { health, withTimeout, currentDeadline, installDeadlineDispatcher } from 'otel-lifeline';
      import * as sdk from 'otel-lifeline/sdk';
      const at = await withTimeout(1000, async () => currentDeadline());
      console.log(typeof health.status, typeof installDeadlineDispatcher, typeof sdk.startLifeline, at !== undefined);`,
      ],
      { cwd: service, env: serviceEnv(), timeoutMs: 20_000 },
    );
    expect(esm.code, describeRun('ESM import', esm)).toBe(0);
    expect(esm.stdout.trim()).toBe('function function function true');
    const cjs = await run(
      process.execPath,
      ['-e', `const lifeline = require('otel-lifeline'); console.log(typeof lifeline.withTimeout);`],
      {
        cwd: service,
        env: serviceEnv(),
        timeoutMs: 20_000,
      },
    );
    expect(cjs.code, describeRun('require(esm)', cjs)).toBe(0);
    expect(cjs.stdout.trim()).toBe('function');
  });

  it('the lifeline bin is installed: npx lifeline health against nothing listening exits 2 (unreachable)', async () => {
    const result = await run(
      'npx',
      ['--no-install', 'lifeline', 'health', '--url', `http://127.0.0.1:${await freePort()}`, '--timeout', '2s'],
      {
        cwd: service,
        env: serviceEnv(),
        timeoutMs: 30_000,
      },
    );
    expect(result.code, describeRun('npx lifeline health', result)).toBe(2);
  });
});
