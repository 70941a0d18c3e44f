/**
 * What register mode loads only when the app does: node:http2 (wrapped for the deadline header on
 * the app's first import of it), node:https (patched by OpenTelemetry's instrumentation on the
 * app's first import of it, which from an ES module never passes through `require`), and NodeSDK
 * with its exporters (only when a logs or metrics exporter other than `none` is asked for).
 */
import { describe, expect, it } from 'vitest';
import { runNode } from '../support/node.js';

const env = (more: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  LIFELINE_AUTO_INSTRUMENTATIONS: 'off',
  LIFELINE_PROBE_PORT: '0',
  OTEL_TRACES_EXPORTER: 'none',
  ...more,
});

const loadedBuiltins = `const loaded = (...names) => names.filter((n) => process.moduleLoadList.includes('NativeModule ' + n));`;

describe('modules register mode loads only when the app does', () => {
  it('OTEL_METRICS_EXPORTER=none and OTEL_LOGS_EXPORTER=none load neither NodeSDK nor node:http2, node:https or TLS', async () => {
    const source = `${loadedBuiltins} console.log(JSON.stringify(loaded('http2', 'https', 'tls')));`;
    const result = await runNode(['--import', 'otel-lifeline/register', '-e', source], {
      env: env({ OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none' }),
    });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual([]);
  });

  it.each([
    ['an ES module', `import http2 from 'node:http2';`, ['--input-type=module']],
    ['CommonJS', `const http2 = require('node:http2');`, []],
  ])('node:http2 imported by %s after start-up: its first stream carries the deadline header', async (_kind, load, flags) => {
    const source = `${load}
      const { withTimeout } = await import('otel-lifeline');
      const server = http2.createServer();
      server.on('stream', (stream, headers) => { stream.respond({ ':status': 200 }); stream.end(String(headers['x-request-timeout-ms'] ?? 'none')); });
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const session = http2.connect('http://127.0.0.1:' + server.address().port);
      const body = await withTimeout(5_000, () => new Promise((resolve, reject) => {
        const stream = session.request({ ':path': '/' });
        let text = '';
        stream.setEncoding('utf8').on('data', (chunk) => (text += chunk)).on('end', () => resolve(text)).on('error', reject);
      }));
      session.close(); server.close();
      console.log(JSON.stringify({ header: Number(body) }));`;
    const wrapped = flags.length === 0 ? `(async () => { ${source} })();` : source;
    const result = await runNode(['--import', 'otel-lifeline/register', ...flags, '-e', wrapped], {
      env: env({ LIFELINE_DEADLINE_HEADER_HOSTS: '127.0.0.1' }),
    });
    expect(result.stderr).toBe('');
    const { header } = JSON.parse(result.stdout) as { header: number };
    expect(header).toBeGreaterThan(4_000);
    expect(header).toBeLessThanOrEqual(5_000);
  });

  it('node:https first imported by an ES module after start-up gets OpenTelemetry’s instrumentation in its named exports, without the loader hook too', async () => {
    const source = `import { request } from 'node:https';
      console.log(JSON.stringify({ wrapped: request.__wrapped === true }));`;
    for (const hook of ['on', 'off']) {
      const result = await runNode(['--import', 'otel-lifeline/register', '--input-type=module', '-e', source], {
        env: env({ LIFELINE_ESM_HOOK: hook }),
      });
      expect(result.stderr).toBe('');
      expect(JSON.parse(result.stdout)).toEqual({ wrapped: true });
    }
  });
});
