import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { envCorrections } from '../../src/config/index.js';
import { otlpDestination } from '../../src/export/index.js';
import { ROOT } from '../support/node.js';
import { otlpReceiver } from '../support/otlp-receiver.js';

interface Service {
  /** lifeline's log lines that carry a `variable` (the settings warnings), as parsed. */
  warnings: () => { variable: string; value: string; used: string; msg: string }[];
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code once the process ended (SIGTERM sent by `stop`, or on its own). */
  exited: Promise<number | null>;
  up: Promise<void>;
  /** Resolves once `n` settings warnings were written (pino writes asynchronously, after `up` maybe), or after 10 s. */
  warned: (n: number) => Promise<void>;
  stop: () => Promise<void>;
}

const started: Service[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((service) => service.stop()));
});

/** An idle service under register mode with `env` on top of the test's; says `up` once the app runs. */
function service(env: NodeJS.ProcessEnv): Service {
  const source = `console.log('up'); setInterval(() => undefined, 1000);`;
  const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', '--input-type=module', '-e', source], {
    cwd: ROOT,
    env: { ...process.env, LIFELINE_PROBE_PORT: '0', OTEL_TRACES_EXPORTER: 'none', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const waiting: { n: number; resolve: () => void }[] = [];
  const up = new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      stdout += `${line}\n`;
      if (line === 'up') resolve();
      const count = result.warnings().length;
      for (const waiter of waiting.filter(({ n }) => count >= n)) waiter.resolve();
    });
    void exited.then((code) => {
      reject(new Error(`exited ${String(code)} before the app ran: ${stderr}${stdout}`));
    });
  });
  up.catch(() => undefined);
  const result: Service = {
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    up,
    warned: (n) =>
      result.warnings().length >= n
        ? Promise.resolve()
        : new Promise((resolve) => {
            const timer = setTimeout(resolve, 10_000);
            waiting.push({
              n,
              resolve: () => {
                clearTimeout(timer);
                resolve();
              },
            });
          }),
    warnings: () =>
      stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, string>)
        .filter((line) => line.variable !== undefined)
        .map(({ variable = '', value = '', used = '', msg = '' }) => ({ variable, value, used, msg })),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
  started.push(result);
  return result;
}

describe('bad OTEL_* export settings are said, and what is used instead (issue 26 item 6)', () => {
  it('register mode: each bad value gives exactly one warning naming the variable and what is used', async () => {
    const bad: Record<string, [string, string]> = {
      OTEL_EXPORTER_OTLP_ENDPOINT: ['not a url', 'the default http://localhost:4318'],
      OTEL_EXPORTER_OTLP_TIMEOUT: ['abc', 'the default 10000'],
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: ['0', 'the default 10000'],
      OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: ['localhost:4318', 'the default http://localhost:4318/v1/metrics'],
      OTEL_METRIC_EXPORT_INTERVAL: ['1', '1000'],
      OTEL_METRIC_EXPORT_TIMEOUT: ['1.5', 'the default 30000'],
      OTEL_PROPAGATORS: ['bogus', 'tracecontext,baggage'],
      OTEL_METRICS_EXPORTER: ['bogus', 'none'],
      OTEL_BSP_SCHEDULE_DELAY: ['soon', 'the default'],
      LIFELINE_HEALTH_INTERVAL_MS: ['30', '30'],
    };
    const running = service(Object.fromEntries(Object.entries(bad).map(([variable, [value]]) => [variable, value])));
    await running.up;
    await running.warned(Object.keys(bad).length);
    await running.stop(); // everything it had to say, said: a repeated warning would be in the output by now
    const warnings = running.warnings();
    for (const [variable, [value, used]] of Object.entries(bad)) {
      const about = warnings.filter((warning) => warning.variable === variable);
      expect(about, `${variable}: ${JSON.stringify(warnings)}`).toHaveLength(1);
      expect(about[0]).toMatchObject({ value, used });
      expect(about[0]?.msg).toContain(variable);
      expect(about[0]?.msg).toContain(used);
    }
    expect(warnings).toHaveLength(Object.keys(bad).length);
  }, 30_000);

  it('valid settings are taken without a word', async () => {
    const running = service({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      OTEL_EXPORTER_OTLP_TIMEOUT: '5000',
      OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: '2000',
      OTEL_METRIC_EXPORT_INTERVAL: '60000',
      OTEL_METRIC_EXPORT_TIMEOUT: '30000',
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_PROPAGATORS: 'tracecontext,baggage',
      OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
      LIFELINE_HEALTH_INTERVAL_MS: '15000',
    });
    await running.up;
    await running.stop();
    expect(running.warnings()).toEqual([]);
  }, 30_000);

  it('OTEL_METRIC_EXPORT_INTERVAL=1: metrics are exported at most once a second to a real receiver (the floor)', async () => {
    const receiver = await otlpReceiver();
    try {
      const running = service({
        OTEL_METRICS_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_METRIC_EXPORT_INTERVAL: '1',
      });
      await running.up;
      // Three exports are two intervals: at the floor at least ~2 s (before: 3 exports within a few ms).
      const until = Date.now() + 15_000;
      while ((receiver.requests.get('/v1/metrics')?.length ?? 0) < 3 && Date.now() < until)
        await new Promise((resolve) => setTimeout(resolve, 50));
      const exports = receiver.requests.get('/v1/metrics') ?? [];
      expect(exports.length).toBeGreaterThanOrEqual(3);
      const [first = 0, , third = 0] = exports;
      expect(third - first).toBeGreaterThanOrEqual(1_800);
      await running.warned(1);
      expect(running.warnings()).toEqual([expect.objectContaining({ variable: 'OTEL_METRIC_EXPORT_INTERVAL', value: '1', used: '1000' })]);
    } finally {
      await receiver.close();
    }
  }, 30_000);

  it('a bad OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: spans go where the warning says (OTEL_EXPORTER_OTLP_ENDPOINT)', async () => {
    const receiver = await otlpReceiver();
    try {
      const source = `
        import { trace } from '@opentelemetry/api';
        trace.getTracer('app').startSpan('after a bad endpoint').end();
        console.log('up'); setInterval(() => undefined, 1000);`;
      const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', '--input-type=module', '-e', source], {
        cwd: ROOT,
        env: {
          ...process.env,
          LIFELINE_PROBE_PORT: '0',
          LIFELINE_WATCHDOG: 'off',
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url',
          OTEL_BSP_SCHEDULE_DELAY: '100',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      try {
        await receiver.waitFor((spans) => spans.some((span) => span.name === 'after a bad endpoint'));
        const lines = stdout.split('\n').filter((line) => line.includes('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'));
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain(`using OTEL_EXPORTER_OTLP_ENDPOINT (${receiver.endpoint})`);
      } finally {
        child.kill('SIGKILL');
      }
    } finally {
      await receiver.close();
    }
  }, 30_000);

  it("OTEL_EXPORTER_OTLP_ENDPOINT='not a url': the export warning names the default endpoint used, not 'not a url/v1/traces'", () => {
    expect(otlpDestination({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' })).toBe('http://localhost:4318/v1/traces');
    expect(otlpDestination({ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toBe(
      'http://localhost:4317',
    );
    expect(otlpDestination({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toBe('http://collector:4318/v1/traces');
  });

  it('LIFELINE_HEALTH_INTERVAL_MS=1…9 fails start-up naming LIFELINE_HEALTH_INTERVAL_MS, not watchdog.thresholdMs', async () => {
    for (const value of ['1', '9']) {
      const running = service({ LIFELINE_HEALTH_INTERVAL_MS: value });
      const code = await running.exited;
      expect(code).toBe(1);
      expect(running.stderr()).toContain(`LIFELINE_HEALTH_INTERVAL_MS=${JSON.stringify(value)}`);
      expect(running.stderr()).not.toContain('thresholdMs');
    }
  }, 30_000);
});

describe('envCorrections: the one set of rules', () => {
  it.each([
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'ftp://collector', 'the default http://localhost:4318'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'http://', 'the default http://localhost:4318'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'not a url', 'the default http://localhost:4318/v1/traces'],
    ['OTEL_EXPORTER_OTLP_LOGS_TIMEOUT', '-1', 'the default 10000'],
    ['OTEL_EXPORTER_OTLP_TIMEOUT', '1e3', 'the default 10000'],
    ['OTEL_EXPORTER_OTLP_TIMEOUT', '2147483648', 'the default 10000'],
    ['OTEL_EXPORTER_OTLP_COMPRESSION', 'zstd', 'none'],
    ['OTEL_EXPORTER_OTLP_METRICS_PROTOCOL', 'udp', 'http/protobuf'],
    ['OTEL_METRIC_EXPORT_INTERVAL', '999', '1000'],
    ['OTEL_METRIC_EXPORT_INTERVAL', '0', 'the default 60000'],
    ['OTEL_METRIC_EXPORT_INTERVAL', '1m', 'the default 60000'],
    ['OTEL_METRICS_EXPORTER', 'otlp,bogus', 'otlp'],
    ['OTEL_PROPAGATORS', 'b3', 'tracecontext,baggage'],
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '0', 'the default'],
    ['LIFELINE_HEALTH_INTERVAL_MS', '999', '999'],
  ])('%s=%s → one correction, using %s', (variable, value, used) => {
    const corrections = envCorrections({ [variable]: value });
    expect(corrections).toHaveLength(1);
    expect(corrections[0]).toMatchObject({ variable, used });
    expect(corrections[0]?.message).toContain(variable);
  });

  it.each([
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'https://collector.example:4318/base'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'http://[::1]:4318/v1/traces'],
    ['OTEL_METRIC_EXPORT_INTERVAL', '1000'],
    ['OTEL_METRICS_EXPORTER', 'otlp, prometheus'],
    ['OTEL_PROPAGATORS', 'tracecontext, baggage'],
    ['LIFELINE_HEALTH_INTERVAL_MS', '1000'],
  ])('%s=%s is taken as set', (variable, value) => {
    expect(envCorrections({ [variable]: value })).toEqual([]);
  });

  it('gRPC endpoints may be host:port; per-signal ones fall back to a valid OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    expect(envCorrections({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' })).toEqual([]);
    expect(
      envCorrections({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'nope' })[0]?.used,
    ).toBe('OTEL_EXPORTER_OTLP_ENDPOINT (http://collector:4318)');
  });

  it('an endpoint with credentials is not logged with them', () => {
    const [correction] = envCorrections({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://user:s3cr3tpass@collector' });
    expect(correction?.message).not.toContain('s3cr3tpass');
    expect(correction?.value).not.toContain('s3cr3tpass');
  });

  it('a long credential is not logged in part either (the value is redacted before it is cut)', () => {
    const secret = 'Z'.repeat(60);
    const [correction] = envCorrections({ OTEL_EXPORTER_OTLP_ENDPOINT: `svc-account:${secret}@collector:4318` });
    expect(correction?.message).not.toMatch(/Z{8}/);
    expect(correction?.value).not.toMatch(/Z{8}/);
  });
});
