import { describe, expect, it } from 'vitest';
import { readEnvConfig } from '../../src/config/index.js';
import { LifelineError } from '../../src/index.js';
import { runModule } from '../support/node.js';

describe('readEnvConfig (docs/configuration.md)', () => {
  it('defaults when nothing is set', () => {
    expect(readEnvConfig({})).toEqual({
      probe: {},
      esmHook: true,
      autoInstrumentations: true,
      headersTimeoutMs: 60_000,
      envoyUpstreamTimeout: false,
      grpcHealth: true,
      exportBuffer: {},
      probeLimits: {},
      watchdog: undefined,
      evidence: true,
    });
  });

  it('reads every variable', () => {
    expect(
      readEnvConfig({
        LIFELINE_PROBE_PORT: '9000',
        LIFELINE_PROBE_HOST: '0.0.0.0',
        LIFELINE_HEALTH_INTERVAL_MS: '500',
        LIFELINE_DEFAULT_TIMEOUT_MS: '2500',
        LIFELINE_DIAGNOSTICS_LOG: 'info',
        LIFELINE_LOG_LEVEL: 'debug',
        LIFELINE_ESM_HOOK: 'off',
        LIFELINE_AUTO_INSTRUMENTATIONS: 'off',
        LIFELINE_HEADERS_TIMEOUT_MS: '0',
        LIFELINE_DEADLINE_HEADER_HOSTS: 'internal, .Corp.example.com,billing,fd00::1',
        LIFELINE_ENVOY_UPSTREAM_TIMEOUT: 'on',
        LIFELINE_GRPC_HEALTH: 'off',
        LIFELINE_EXPORT_BUFFER_SPANS: '10000',
        LIFELINE_EXPORT_BUFFER_BYTES: '67108864',
        LIFELINE_PROBE_MAX_CONNECTIONS: '16',
        LIFELINE_PROBE_MAX_CONNECTIONS_PER_ADDRESS: '4',
        LIFELINE_PROBE_MAX_OVERFLOW_CONNECTIONS: '0',
        LIFELINE_PROBE_MAX_REQUESTS_PER_SECOND: '200',
        LIFELINE_WATCHDOG_THRESHOLD_MS: '2000',
        LIFELINE_EVIDENCE: 'off',
      }),
    ).toEqual({
      probe: { port: 9000, host: '0.0.0.0' },
      healthIntervalMs: 500,
      defaultTimeoutMs: 2500,
      diagnosticsLog: 'info',
      logLevel: 'debug',
      esmHook: false,
      autoInstrumentations: false,
      headersTimeoutMs: 0,
      envoyUpstreamTimeout: true,
      grpcHealth: false,
      deadlineHeaderHosts: ['internal', '.corp.example.com', 'billing', 'fd00::1'],
      exportBuffer: { maxSpans: 10_000, maxBytes: 67_108_864 },
      probeLimits: { maxConnections: 16, maxConnectionsPerAddress: 4, maxOverflowConnections: 0, maxRequestsPerSecond: 200 },
      watchdog: { thresholdMs: 2_000 },
      evidence: false,
    });
    expect(readEnvConfig({ LIFELINE_WATCHDOG: 'off', LIFELINE_WATCHDOG_THRESHOLD_MS: '2000' }).watchdog).toBe(false);
    expect(readEnvConfig({ LIFELINE_WATCHDOG: 'on' }).watchdog).toEqual({});
    expect(readEnvConfig({}).watchdog).toBeUndefined(); // register mode decides
    expect(readEnvConfig({ LIFELINE_DEADLINE_HEADER_HOSTS: 'none' }).deadlineHeaderHosts).toBe('none');
  });

  it('LIFELINE_PROBE_PORT=0 disables the probe server', () => {
    expect(readEnvConfig({ LIFELINE_PROBE_PORT: '0' }).probe).toBe(false);
  });

  it.each([
    ['LIFELINE_PROBE_PORT', 'abc'],
    ['LIFELINE_PROBE_PORT', '-1'],
    ['LIFELINE_PROBE_PORT', '65536'],
    ['LIFELINE_PROBE_PORT', '80.5'],
    ['LIFELINE_HEALTH_INTERVAL_MS', '0'],
    ['LIFELINE_HEALTH_INTERVAL_MS', '1e3'],
    ['LIFELINE_HEALTH_INTERVAL_MS', '15s'],
    ['LIFELINE_LOG_LEVEL', 'loud'],
    ['LIFELINE_ESM_HOOK', 'yes'],
    ['LIFELINE_AUTO_INSTRUMENTATIONS', 'true'],
    ['LIFELINE_GRPC_HEALTH', 'yes'],
    ['LIFELINE_HEADERS_TIMEOUT_MS', '60s'],
    ['LIFELINE_DEADLINE_HEADER_HOSTS', 'https://api.example.com'],
    ['LIFELINE_DEADLINE_HEADER_HOSTS', 'a..b'],
    ['LIFELINE_DEFAULT_TIMEOUT_MS', '-1'],
    ['LIFELINE_DIAGNOSTICS_LOG', 'verbose'],
    ['LIFELINE_EXPORT_BUFFER_SPANS', '0'],
    ['LIFELINE_EXPORT_BUFFER_BYTES', '16MiB'],
    ['LIFELINE_PROBE_MAX_CONNECTIONS', '0'],
    ['LIFELINE_PROBE_MAX_CONNECTIONS_PER_ADDRESS', '0'],
    ['LIFELINE_PROBE_MAX_OVERFLOW_CONNECTIONS', '-1'],
    ['LIFELINE_PROBE_MAX_REQUESTS_PER_SECOND', '-5'],
    ['LIFELINE_WATCHDOG', 'yes'],
    ['LIFELINE_EVIDENCE', 'no'],
    ['LIFELINE_WATCHDOG_THRESHOLD_MS', '5'],
  ])('%s=%s is rejected naming the variable and the value', (name, value) => {
    let error: unknown;
    try {
      readEnvConfig({ [name]: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(LifelineError);
    expect((error as Error).message).toContain(`${name}=${JSON.stringify(value)}`);
  });
});

describe('the process-wide catalog reads its setting when first used, not at import', () => {
  it('an invalid LIFELINE_HEALTH_INTERVAL_MS lets the import succeed, then fails the first registration naming it', async () => {
    const result = await runModule(
      `const { health } = await import('otel-lifeline');
       console.log('imported');
       try { health.registerLiveness('poller'); } catch (err) { console.log(err.code, err.message); }`,
      { env: { ...process.env, LIFELINE_HEALTH_INTERVAL_MS: '15s' } },
    );
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain('imported');
    expect(result.stdout).toContain('ERR_INVALID_OPTION');
    expect(result.stdout).toContain('LIFELINE_HEALTH_INTERVAL_MS="15s"');
  });

  it('an invalid LIFELINE_HEALTH_INTERVAL_MS fails startLifeline, naming it, before anything is installed', async () => {
    const result = await runModule(
      `const { startLifeline } = await import('otel-lifeline/sdk');
       try { await startLifeline({ probe: false, watchdog: false }); console.log('started'); } catch (err) { console.log(err.code, err.message); }`,
      { env: { ...process.env, LIFELINE_HEALTH_INTERVAL_MS: '15s', OTEL_TRACES_EXPORTER: 'none' } },
    );
    expect(result.stdout).not.toContain('started');
    expect(result.stdout).toContain('LIFELINE_HEALTH_INTERVAL_MS="15s"');
  });

  it('a valid one is the interval of the first registration', async () => {
    const result = await runModule(
      `const { health } = await import('otel-lifeline');
       process.env.LIFELINE_HEALTH_INTERVAL_MS = '250'; // set after the import: still read
       health.registerLiveness('poller').close();
       console.log(health.interval, health.stallAfterMs);`,
      { env: { ...process.env, LIFELINE_HEALTH_INTERVAL_MS: undefined } },
    );
    expect(result.stdout.trim()).toBe('250 500');
  });
});
