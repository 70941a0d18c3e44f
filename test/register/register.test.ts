import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort, ROOT, runNode } from '../support/node.js';

const QUIET_OTEL = { OTEL_TRACES_EXPORTER: 'none', OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none' };

/** Starts an app under `--import otel-lifeline/register`, asks its probe server, and waits for it to exit on its own. */
async function probeRegisteredApp(app: string, port: number): Promise<{ live: number; body: unknown; code: number | null }> {
  const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', app], {
    cwd: ROOT,
    env: { ...process.env, ...QUIET_OTEL, LIFELINE_PROBE_PORT: String(port), APP_LIFETIME_MS: '3000' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve) =>
    child.stdout.once('data', () => {
      resolve();
    }),
  );
  const res = await fetch(`http://127.0.0.1:${port}/live`);
  const body: unknown = await res.json();
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { live: res.status, body, code };
}

describe('lifeline/register (docs/configuration.md)', () => {
  it.each(['test/fixtures/plain-app.mjs', 'test/fixtures/plain-app.cjs'])(
    'instruments the unmodified app %s: probe server up, process still exits by itself',
    async (app) => {
      const { live, body, code } = await probeRegisteredApp(app, await freePort());
      expect(live).toBe(200);
      expect(body).toEqual({ status: 'pass', healthy: ['healthcheck'], unhealthy: [] });
      expect(code).toBe(0);
    },
  );

  it('LIFELINE_PROBE_MAX_CONNECTIONS and LIFELINE_PROBE_MAX_OVERFLOW_CONNECTIONS reach the probe server: at the cap, a probe takes the slot of a silent connection and is answered', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
      cwd: ROOT,
      env: {
        ...process.env,
        ...QUIET_OTEL,
        LIFELINE_PROBE_PORT: String(port),
        LIFELINE_PROBE_MAX_CONNECTIONS: '1',
        LIFELINE_PROBE_MAX_OVERFLOW_CONNECTIONS: '0',
        APP_LIFETIME_MS: '20000',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await new Promise<void>((resolve) =>
        child.stdout.once('data', () => {
          resolve();
        }),
      );
      // A client that connects and says nothing holds the one slot (with the default 64, it would stay).
      const holder = connect(port, '127.0.0.1');
      const closed = new Promise<void>((resolve) =>
        holder.once('close', () => {
          resolve();
        }),
      );
      holder.on('error', () => undefined);
      await new Promise<void>((resolve) =>
        holder.once('connect', () => {
          resolve();
        }),
      );
      // While the holder is young (a prober may not have sent its request yet) a newcomer is closed at
      // accept; once it has been silent long enough, a probe takes its slot. With the defaults (64
      // slots, 4,096 overflow) the holder would stay and no probe be closed.
      let live: number | string = 'closed';
      let refused = 0;
      for (let attempt = 0; attempt < 1_000 && live !== 200; attempt++) {
        live = await fetch(`http://127.0.0.1:${port}/live`).then(
          (res) => res.status,
          () => 'closed',
        );
        if (live === 'closed') refused++;
      }
      expect(refused).toBeGreaterThan(0);
      await closed; // the server cut the silent holder to make room
    } finally {
      child.kill();
    }
  });

  it.each([
    ['LIFELINE_PROBE_PORT', 'http'],
    ['LIFELINE_HEALTH_INTERVAL_MS', '-3'],
    ['LIFELINE_LOG_LEVEL', 'chatty'],
  ])('an invalid %s=%s stops start-up with a message naming it', async (name, value) => {
    const result = await runNode(['--import', 'otel-lifeline/register', 'test/fixtures/plain-app.mjs'], {
      env: { ...process.env, ...QUIET_OTEL, [name]: value },
    });
    expect(result.code).toBe(1);
    expect(result.stdout).not.toContain('app listening');
    expect(result.stderr).toContain(`invalid ${name}=${JSON.stringify(value)}`);
    expect(result.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
  });
});
