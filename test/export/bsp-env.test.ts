import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import type { Logger } from '../../src/log/index.js';
import { batchProcessorFromEnv, batchTuningFromEnv } from '../../src/export/index.js';
import { ROOT } from '../support/node.js';

function capture(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const ignore = (): void => undefined;
  return { warnings, logger: { warn: (_obj, msg) => warnings.push(msg), info: ignore, debug: ignore } };
}

describe('OTEL_BSP_* (issue 12 item 4)', () => {
  it('passes valid values on', () => {
    const { logger, warnings } = capture();
    expect(
      batchTuningFromEnv(
        {
          OTEL_BSP_MAX_QUEUE_SIZE: '4096',
          OTEL_BSP_MAX_EXPORT_BATCH_SIZE: ' 1024 ',
          OTEL_BSP_SCHEDULE_DELAY: '0',
          OTEL_BSP_EXPORT_TIMEOUT: '2147483647',
        },
        logger,
      ),
    ).toEqual({
      maxQueueSize: 4096,
      maxExportBatchSize: 1024,
      scheduledDelayMillis: 0,
      exportTimeoutMillis: 2_147_483_647,
    });
    expect(batchTuningFromEnv({}, logger)).toEqual({});
    expect(warnings).toEqual([]);
  });

  const BAD: [string, string][] = [
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '0'],
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '-1'],
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '1.5'],
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '5e2'],
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '4096'], // more than the default queue (2048)
    ['OTEL_BSP_MAX_QUEUE_SIZE', '0'],
    ['OTEL_BSP_MAX_QUEUE_SIZE', 'lots'],
    ['OTEL_BSP_MAX_QUEUE_SIZE', '0x800'],
    ['OTEL_BSP_SCHEDULE_DELAY', '-5'],
    ['OTEL_BSP_SCHEDULE_DELAY', '2147483648'], // beyond a timer: would fire at once, in a loop
    ['OTEL_BSP_SCHEDULE_DELAY', 'Infinity'],
    ['OTEL_BSP_EXPORT_TIMEOUT', '-1'],
    ['OTEL_BSP_EXPORT_TIMEOUT', '99999999999999999999'],
    ['OTEL_BSP_EXPORT_TIMEOUT', '30s'],
  ];
  it.each(BAD)('%s=%s: warned once, naming the variable, and the default used', (name, value) => {
    const { logger, warnings } = capture();
    const tuning = batchTuningFromEnv({ [name]: value }, logger);
    expect(tuning).toEqual({});
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(name);
    expect(warnings[0]).toContain('default');
  });

  it('a default batch is capped by a smaller queue; a batch over a given queue falls back to it', () => {
    const { logger, warnings } = capture();
    expect(batchTuningFromEnv({ OTEL_BSP_MAX_QUEUE_SIZE: '100' }, logger)).toEqual({ maxQueueSize: 100, maxExportBatchSize: 100 });
    expect(warnings).toEqual([]);
    expect(batchTuningFromEnv({ OTEL_BSP_MAX_QUEUE_SIZE: '1000', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2000' }, logger)).toEqual({
      maxQueueSize: 1000,
    });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  });

  it('a processor built from OTEL_BSP_MAX_EXPORT_BATCH_SIZE=0 flushes (the default batch of 512)', async () => {
    const { logger } = capture();
    const exporter = new InMemorySpanExporter();
    const processor = batchProcessorFromEnv(exporter, batchTuningFromEnv({ OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '0' }, logger));
    expect((processor as unknown as { _maxExportBatchSize: number })._maxExportBatchSize).toBe(512);
    await processor.shutdown();
  });

  it('register mode with OTEL_BSP_MAX_EXPORT_BATCH_SIZE=0: warns, and exits promptly on SIGTERM with spans to flush', async () => {
    const source = `
      import { trace } from '@opentelemetry/api';
      trace.getTracer('app').startSpan('work before SIGTERM').end();
      setInterval(() => undefined, 1000);
      console.log('up');
    `;
    const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', '--input-type=module', '-e', source], {
      cwd: ROOT,
      // A closed port: the flush fails fast; what matters is that it ends.
      env: {
        ...process.env,
        LIFELINE_PROBE_PORT: '0',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
        OTEL_EXPORTER_OTLP_TIMEOUT: '500',
        OTEL_BSP_SCHEDULE_DELAY: '60000',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    const lines = createInterface({ input: child.stdout });
    const up = new Promise((resolve) =>
      lines.on('line', (line) => {
        stdout += `${line}\n`;
        if (line === 'up') resolve(undefined);
      }),
    );
    const exited = new Promise<{ signal: NodeJS.Signals | null; at: number }>((resolve) =>
      child.once('exit', (_code, signal) => {
        resolve({ signal, at: Date.now() });
      }),
    );
    try {
      await up;
      const signalled = Date.now();
      child.kill('SIGTERM');
      const exit = await Promise.race([
        exited,
        new Promise<undefined>((resolve) =>
          setTimeout(() => {
            resolve(undefined);
          }, 10_000),
        ),
      ]);
      expect(exit).toBeDefined();
      expect(exit?.signal).toBe('SIGTERM');
      expect((exit?.at ?? Infinity) - signalled).toBeLessThan(5_000);
      expect(stdout).toContain('OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
    } finally {
      child.kill('SIGKILL');
    }
  }, 20_000);
});
