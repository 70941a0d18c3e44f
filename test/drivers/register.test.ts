import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, pgRunning, startPostgres, type PostgresServer } from '../support/databases.js';
import { startService, type ChildService } from '../support/service.js';

/**
 * The field trial that found no deadline on the database, re-run: a service changed in nothing,
 * under `--import otel-lifeline/register` (ES module, Sequelize on pg, loaded after lifeline), and a
 * CommonJS one that loads pg before it starts lifeline itself. A query stuck on the server ends at
 * the caller's inbound `x-request-timeout-ms`, or at `LIFELINE_DEFAULT_TIMEOUT_MS` when the caller
 * sends none; the service answers, and PostgreSQL no longer runs the query.
 */
let server: PostgresServer | undefined;
const services: ChildService[] = [];

beforeAll(async () => {
  server = await startPostgres();
}, 60_000);
afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
  await server?.stop();
});

function postgres(): PostgresServer {
  if (server === undefined) throw new Error('PostgreSQL did not start');
  return server;
}

async function start(script: string, nodeArgs: string[], env: NodeJS.ProcessEnv = {}): Promise<ChildService> {
  const { host, port, user, password, database } = postgres();
  const service = await startService(
    script,
    {
      DB_HOST: host,
      DB_PORT: String(port),
      DB_USER: user,
      DB_PASSWORD: password,
      DB_NAME: database,
      LIFELINE_PROBE_PORT: '0',
      OTEL_TRACES_EXPORTER: 'none',
      OTEL_METRICS_EXPORTER: 'none',
      LIFELINE_AUTO_INSTRUMENTATIONS: 'off',
      ...env,
    },
    nodeArgs,
  );
  services.push(service);
  return service;
}

/** GET /sleep on `service`; how long it took and what it answered. */
async function sleepCall(service: ChildService, tag: string, headers: Record<string, string> = {}) {
  const started = performance.now();
  const response = await fetch(`${service.url}/sleep?s=30&tag=${tag}`, { headers, signal: AbortSignal.timeout(15_000) });
  const body = (await response.json()) as { deadline?: boolean; message?: string };
  return { status: response.status, body, ms: performance.now() - started };
}

describe('a database query in a service changed in nothing', () => {
  it('ESM + Sequelize under register mode: ended at the inbound x-request-timeout-ms, and on the server', async () => {
    const service = await start('test/fixtures/db-service.mjs', ['--import', 'otel-lifeline/register']);
    const tag = `inbound_${String(Date.now())}`;
    const { status, body, ms } = await sleepCall(service, tag, { 'x-request-timeout-ms': '1500' });
    expect({ status, deadline: body.deadline }).toEqual({ status: 504, deadline: true });
    expect(ms).toBeGreaterThanOrEqual(1_400);
    expect(ms).toBeLessThan(1_500 + 1_000);
    expect(await eventually(async () => (await pgRunning(postgres(), tag)) === 0, 1_000)).toBe(true);
  });

  it('ESM + Sequelize under register mode: LIFELINE_DEFAULT_TIMEOUT_MS bounds a query nothing else bounds', async () => {
    const service = await start('test/fixtures/db-service.mjs', ['--import', 'otel-lifeline/register'], {
      LIFELINE_DEFAULT_TIMEOUT_MS: '1000',
    });
    const tag = `default_${String(Date.now())}`;
    const { status, body, ms } = await sleepCall(service, tag);
    expect({ status, deadline: body.deadline }).toEqual({ status: 504, deadline: true });
    expect(ms).toBeLessThan(1_000 + 1_000);
    expect(await eventually(async () => (await pgRunning(postgres(), tag)) === 0, 1_000)).toBe(true);
  });

  it("with OpenTelemetry's own pg instrumentation (the auto-instrumentations): the same, and the service still answers", async () => {
    const service = await start('test/fixtures/db-service.mjs', ['--import', 'otel-lifeline/register'], {
      LIFELINE_AUTO_INSTRUMENTATIONS: 'on',
    });
    const tag = `auto_${String(Date.now())}`;
    const { status, body, ms } = await sleepCall(service, tag, { 'x-request-timeout-ms': '1000' });
    expect({ status, deadline: body.deadline }).toEqual({ status: 504, deadline: true });
    expect(ms).toBeLessThan(1_000 + 1_000);
    expect(await eventually(async () => (await pgRunning(postgres(), tag)) === 0, 1_000)).toBe(true);
  });

  it('CommonJS, pg loaded before startLifeline: ended at the inbound deadline, and on the server', async () => {
    const service = await start('test/fixtures/db-service-preloaded.cjs', []);
    const tag = `preloaded_${String(Date.now())}`;
    const { status, body, ms } = await sleepCall(service, tag, { 'x-request-timeout-ms': '1000' });
    expect({ status, deadline: body.deadline }).toEqual({ status: 504, deadline: true });
    expect(ms).toBeLessThan(1_000 + 1_000);
    expect(await eventually(async () => (await pgRunning(postgres(), tag)) === 0, 1_000)).toBe(true);
  });
});
