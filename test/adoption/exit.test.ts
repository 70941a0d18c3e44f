/**
 * A process that ends on its own (a cron job, a script, a test file) under register mode exits
 * about when it would without lifeline, whatever the collector does: the flush at its end sends
 * once, within a budget, and says what it could not deliver. Measured on the esm-express-fetch
 * service's stock report (src/stock-report.mjs), installed from the packed tarball: the exit delay
 * is the time from the job's last line (`done`, with its clock) to the process's exit.
 */
import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runJob, type JobExit } from '../support/job-exit.js';
import { closeServer, freePort, installService, listen, removeDir, serviceEnv, startCollector } from './support.js';

const RUNS = 3;
const figures: string[] = [];
afterAll(() => {
  if (figures.length > 0) console.log(`exit figures:\n${figures.map((line) => `  ${line}`).join('\n')}`);
});

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

describe('a job that ends on its own, under register mode (esm-express-fetch: npm run report)', () => {
  let dir: string | undefined;
  let inventory: ReturnType<typeof createHttpServer>;
  let upstreamUrl = '';

  beforeAll(async () => {
    dir = (await installService('esm-express-fetch', inject('lifelineTarball'))).dir;
    inventory = createHttpServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"stock":4}'));
    upstreamUrl = `http://127.0.0.1:${String(await listen(inventory))}`;
  });
  afterAll(async () => {
    await closeServer(inventory);
    await removeDir(dir);
  });

  async function delays(label: string, nodeArgs: string[], extra: NodeJS.ProcessEnv): Promise<{ median: number; runs: JobExit[] }> {
    const runs: JobExit[] = [];
    for (let i = 0; i < RUNS; i++) {
      const run = await runJob('src/stock-report.mjs', nodeArgs, {
        cwd: dir ?? '',
        env: serviceEnv({ UPSTREAM_URL: upstreamUrl, OTEL_SERVICE_NAME: 'stock-report', ...extra }),
      });
      expect(run.code, run.output).toBe(0);
      expect(run.exitDelayMs, run.output).not.toBeNaN();
      runs.push(run);
    }
    const result = { median: median(runs.map((run) => run.exitDelayMs)), runs };
    figures.push(`${label}: exit delay median ${String(result.median)} ms (${runs.map((run) => run.exitDelayMs).join(', ')})`);
    return result;
  }

  const REGISTER = ['--import', 'otel-lifeline/register'];

  it('exits within 0.3 s of plain when the collector refuses connections, within 1 s when it never answers; spans reach one that answers', async () => {
    const plain = await delays('plain node', [], {});

    const collector = await startCollector();
    try {
      const up = await delays('register mode, collector up', REGISTER, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint });
      expect(collector.exports(), 'the flush at the end delivered the job’s spans').toBeGreaterThanOrEqual(RUNS);
      for (const run of up.runs) expect(run.output, 'nothing dropped').not.toContain('spans dropped');
    } finally {
      await collector.close();
    }

    const refusedPort = await freePort(); // nothing listens
    const refused = await delays('register mode, collector refusing connections', REGISTER, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(refusedPort)}`,
    });
    expect(refused.median).toBeLessThanOrEqual(plain.median + 300);
    for (const run of refused.runs) {
      // Said once: how many spans were not delivered, and why.
      const drops = run.output.split('\n').filter((line) => line.includes('spans dropped'));
      expect(drops, run.output).toHaveLength(1);
      expect(JSON.parse(drops[0] ?? '{}')).toMatchObject({ reasons: { exit: expect.any(Number) as number } });
    }

    // A collector that takes the connection and never answers: the export hangs as on a blackholed
    // one (test/faults/exit-blackhole.test.ts drops the packets for real).
    const sockets = new Set<Socket>();
    const silent = createNetServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined).resume();
    });
    const silentPort = await listen(silent);
    try {
      for (const protocol of ['http/protobuf', 'grpc']) {
        const hanging = await delays(`register mode, OTLP ${protocol} collector never answering`, REGISTER, {
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(silentPort)}`,
        });
        expect(hanging.median).toBeLessThanOrEqual(plain.median + 1_000);
        for (const run of hanging.runs) {
          expect(
            run.output.split('\n').filter((line) => line.includes('spans dropped')),
            run.output,
          ).toHaveLength(1);
        }
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      await closeServer(silent);
    }
  });
});
