/**
 * An app whose tree pins an older `@opentelemetry/api` (1.4, 1.7, 1.9): `npm install` of the packed
 * tarball leaves the pin alone and prints no peer-dependency warning, and register mode runs the
 * app, ES module and CommonJS alike: the app's own spans (made through its own copy of the API) are
 * recorded by lifeline's SDK, carried to the HTTP calls it makes, and exported. lifeline brings its
 * OpenTelemetry packages inside its own tarball (bundled dependencies), API included, so npm never
 * has to fit them into the app's tree; the app's older API reads the globals lifeline's newer one
 * registered, as the API's version rule allows.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { describeRun, installService, removeDir, run, serviceEnv, startCollector, type RunResult } from './support.js';

interface Invoice {
  module: string;
  apiVersion: string;
  recording: boolean;
  traceId: string;
  injected: { traceparent?: string };
  ledgerSaw: string | null;
}

describe.each(['1.4.0', '1.7.0', '1.9.0'])('an app pinning @opentelemetry/api %s', (version) => {
  let dir: string | undefined;
  let install: RunResult;

  beforeAll(async () => {
    ({ dir, install } = await installService('api-pinned', inject('lifelineTarball'), (pkg) => {
      pkg.dependencies = { ...pkg.dependencies, '@opentelemetry/api': version };
    }));
  });
  afterAll(() => removeDir(dir));

  it('npm install keeps the pin and prints no peer-dependency warning', async () => {
    const output = install.stdout + install.stderr;
    expect(output).not.toMatch(/ERESOLVE|peer dep/i);
    const installed = JSON.parse(await readFile(join(dir ?? '', 'node_modules/@opentelemetry/api/package.json'), 'utf8')) as {
      version: string;
    };
    expect(installed.version).toBe(version);
  });

  it.each(['invoice.mjs', 'invoice.cjs'])('%s runs under register mode: its spans are recorded, propagated and exported', async (entry) => {
    const collector = await startCollector();
    try {
      const result = await run(process.execPath, ['--import', 'otel-lifeline/register', `src/${entry}`], {
        cwd: dir ?? '',
        env: serviceEnv({ OTEL_SERVICE_NAME: 'billing-worker', OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, LIFELINE_PROBE_PORT: '0' }),
        timeoutMs: 60_000,
      });
      expect(result.code, describeRun(entry, result)).toBe(0);
      const line = result.stdout.split('\n').find((text) => text.startsWith('{"module"'));
      expect(line, describeRun(entry, result)).toBeDefined();
      const invoice = JSON.parse(line ?? '{}') as Invoice;
      expect(invoice.apiVersion).toBe(version); // the app's own API, not lifeline's
      expect(invoice.recording).toBe(true);
      expect(invoice.traceId).not.toMatch(/^0+$/);
      expect(invoice.injected.traceparent).toContain(invoice.traceId);
      expect(invoice.ledgerSaw).toContain(invoice.traceId); // lifeline's http/fetch instrumentation carried it
      expect(collector.exports(), describeRun(entry, result)).toBeGreaterThanOrEqual(1);
      expect(result.stderr).not.toMatch(/SyntaxError|incompatible/i);
    } finally {
      await collector.close();
    }
  });
});
