import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDeadlineExceeded, withDeadline } from '../../src/index.js';
import { installDriverDeadlines, type InstalledDriverDeadlines } from '../../src/drivers/index.js';
import { ensureContextManager } from '../../src/deadline/index.js';
import { cut, deadlineErrorOf } from '../support/cut.js';
import { createTestHost, type TestHost } from '../support/netns.js';

/**
 * A database host whose port drops every SYN (iptables DROP in a test namespace): without lifeline
 * each driver waits for the kernel's SYN retries (about 2 minutes) or its own connect timeout. Under
 * a deadline the connect ends then, with an error `isDeadlineExceeded` recognises.
 */
const PORT = 5432;
const require = createRequire(import.meta.url);
let host: TestHost;
let installed: InstalledDriverDeadlines;

beforeAll(() => {
  ensureContextManager();
  installed = installDriverDeadlines();
  host = createTestHost();
  host.blackhole(PORT);
});
afterAll(() => {
  installed.uninstall();
  host.lift(PORT);
  host.destroy();
});

const underDeadlineIn = (ms: number) => (fn: () => Promise<unknown>) => withDeadline(Date.now() + ms, fn);

type Connect = (address: { host: string; port: number }) => Promise<unknown>;

const CLIENTS: Record<string, Connect> = {
  'pg Client.connect': async ({ host: ip, port }) => {
    const pg = require('pg') as typeof import('pg');
    await new pg.Client({ host: ip, port, user: 'app', database: 'app' }).connect();
  },
  'pg Pool.query': async ({ host: ip, port }) => {
    const pg = require('pg') as typeof import('pg');
    const pool = new pg.Pool({ host: ip, port, user: 'app', database: 'app' });
    try {
      await pool.query('SELECT 1');
    } finally {
      void pool.end();
    }
  },
};

describe('drivers: a blackholed connect ends at the deadline', () => {
  it.each(Object.keys(CLIENTS))('%s', async (name) => {
    const connect = CLIENTS[name];
    if (connect === undefined) throw new Error(name);
    const { error, at, afterDeadlineMs } = await cut(underDeadlineIn(300), () => connect({ host: host.ip, port: PORT }));
    expect(isDeadlineExceeded(error)).toBe(true);
    expect(deadlineErrorOf(error)?.deadline).toBe(at);
    expect(afterDeadlineMs).toBeGreaterThanOrEqual(0);
    expect(afterDeadlineMs).toBeLessThan(50);
  });
});
