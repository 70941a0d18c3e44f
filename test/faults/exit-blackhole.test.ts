/**
 * A job that ends on its own while its collector is blackholed (iptables drops every packet to the
 * collector's port in a host of the test's own): the flush at its end gives up within its budget, so
 * the process exits within 1 s of plain Node, and says once how many spans it dropped. OTLP/HTTP
 * only: over OTLP/gRPC a connect whose SYNs are dropped cannot be ended (grpc-js keeps no handle
 * on the socket it is connecting), so that process waits for the kernel to give up on it; a gRPC
 * collector that takes the connection and never answers is tested in test/adoption/exit.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runJob, type JobExit } from '../support/job-exit.js';
import { createTestHost, type TestHost } from '../support/netns.js';
import { ROOT } from '../support/node.js';

const job = (nodeArgs: string[], env: NodeJS.ProcessEnv): Promise<JobExit> =>
  runJob('test/fixtures/one-shot-job.mjs', nodeArgs, { cwd: ROOT, env: { ...process.env, LIFELINE_PROBE_PORT: '0', ...env } });

let host: TestHost;
beforeAll(() => {
  host = createTestHost();
  host.blackhole(4318);
});
afterAll(() => {
  host.destroy();
});

describe('a blackholed collector at a job’s natural end', () => {
  it.each([
    ['http/protobuf', 4318],
    ['http/json', 4318],
  ])('OTLP %s: exits within 1 s of plain Node; the spans it could not send are said once', async (protocol, port) => {
    const plain = await job([], {});
    expect(plain.code, plain.output).toBe(0);
    const lifeline = await job(['--import', 'otel-lifeline/register'], {
      OTEL_SERVICE_NAME: 'one-shot-job',
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://${host.ip}:${String(port)}`,
    });
    console.log(
      `OTLP ${protocol}, collector blackholed: exit delay ${String(lifeline.exitDelayMs)} ms (plain Node ${String(plain.exitDelayMs)} ms)`,
    );
    expect(lifeline.code, lifeline.output).toBe(0);
    expect(lifeline.exitDelayMs, lifeline.output).toBeLessThanOrEqual(plain.exitDelayMs + 1_000);
    const drops = lifeline.output.split('\n').filter((line) => line.includes('spans dropped'));
    expect(drops, lifeline.output).toHaveLength(1);
    expect(JSON.parse(drops[0] ?? '{}')).toMatchObject({ reasons: { exit: expect.any(Number) as number } });
  });
});
