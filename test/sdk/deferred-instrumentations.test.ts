/**
 * The auto-instrumentations wait for their library: with @opentelemetry/auto-instrumentations-node
 * installed (it is, in this repository), register mode makes an instrumentation of a library only
 * when the app first resolves it, before it loads — from CommonJS and from ES modules alike.
 */
import { describe, expect, it } from 'vitest';
import { INSTRUMENTATION_TARGETS } from '../../src/sdk/instrumentation-targets.js';
import { runNode } from '../support/node.js';

const env = (more: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  LIFELINE_AUTO_INSTRUMENTATIONS: 'on',
  LIFELINE_PROBE_PORT: '0',
  OTEL_TRACES_EXPORTER: 'none',
  ...more,
});

/** The instrumentation packages of the names given that this process has loaded, as a JSON line. */
const LOADED = `const loaded = (...names) => names.filter((n) => Object.keys(require.cache).some((f) => f.includes('/instrumentation-' + n + '/')));`;

describe('deferred auto-instrumentations', () => {
  it('the table of what each instrumentation patches is the installed package’s (re-run scripts/instrumentation-targets.mjs after upgrading it)', async () => {
    const script = '../../scripts/instrumentation-targets.mjs';
    const generated = (await import(script)) as { instrumentationTargets: () => Record<string, string[]> };
    expect(INSTRUMENTATION_TARGETS).toEqual(generated.instrumentationTargets());
  });

  it('CommonJS: nothing of pg’s instrumentation is loaded until the app requires pg, which is then patched as it loads', async () => {
    const source = `${LOADED}
      const before = loaded('pg', 'ioredis', 'mongodb');
      const pg = require('pg');
      console.log(JSON.stringify({ before, after: loaded('pg', 'ioredis', 'mongodb'), wrapped: pg.Client.prototype.query.__wrapped === true }));`;
    const result = await runNode(['--import', 'otel-lifeline/register', '-e', source], { env: env() });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ before: [], after: ['pg'], wrapped: true });
  });

  it('ES modules: an import of ioredis makes its instrumentation in time for the loader hook to patch it', async () => {
    const source = `import { createRequire } from 'node:module';
      const require = createRequire(process.cwd() + '/x.js');
      ${LOADED}
      const before = loaded('ioredis');
      const { default: Redis } = await import('ioredis');
      console.log(JSON.stringify({ before, after: loaded('ioredis'), wrapped: Redis.prototype.sendCommand.__wrapped === true }));`;
    const result = await runNode(['--import', 'otel-lifeline/register', '--input-type=module', '-e', source], { env: env() });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ before: [], after: ['ioredis'], wrapped: true });
  });

  it('the package’s own choice stands: OTEL_NODE_ENABLED_INSTRUMENTATIONS=http,pg leaves ioredis unpatched and pg patched', async () => {
    const source = `${LOADED}
      const Redis = require('ioredis');
      const pg = require('pg');
      console.log(JSON.stringify({ loaded: loaded('pg', 'ioredis'), redis: Redis.prototype.sendCommand.__wrapped === true, pg: pg.Client.prototype.query.__wrapped === true }));`;
    const result = await runNode(['--import', 'otel-lifeline/register', '-e', source], {
      env: env({ OTEL_NODE_ENABLED_INSTRUMENTATIONS: 'http,pg' }),
    });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ loaded: ['pg'], redis: false, pg: true });
  });

  it('a library the app loaded before lifeline started gets its instrumentation at start-up, and is patched from its next require', async () => {
    const source = `${LOADED}
      const before = loaded('pg');
      const pg = require('pg');
      console.log(JSON.stringify({ before, wrapped: pg.Client.prototype.query.__wrapped === true }));`;
    const result = await runNode(['--require', 'pg', '--import', 'otel-lifeline/register', '-e', source], { env: env() });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({ before: ['pg'], wrapped: true });
  });
});
