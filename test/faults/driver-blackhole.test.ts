import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDeadlineExceeded, withDeadline } from '../../src/index.js';
import { installDriverDeadlines } from '../../src/drivers/index.js';
import type { Installed } from '../../src/install/index.js';
import { ensureContextManager } from '../../src/deadline/index.js';
import { lateness } from '../support/clients.js';
import { cut, deadlineErrorOf } from '../support/cut.js';
import { createTestHost, type TestHost } from '../support/netns.js';

/**
 * A database host whose port drops every SYN (pg, mysql2, ioredis, node-redis and mongodb are each
 * pointed at it) (iptables DROP in a test namespace): without lifeline
 * each driver waits for the kernel's SYN retries (about 2 minutes) or its own connect timeout. Under
 * a deadline the connect ends then, with an error `isDeadlineExceeded` recognises.
 */
const PORT = 5432;
const require = createRequire(import.meta.url);
let host: TestHost;
let installed: Installed;

beforeAll(() => {
  ensureContextManager();
  installed = installDriverDeadlines();
  // Loaded here, after the install as in a service: loading a driver inside the call would spend its deadline.
  for (const driver of ['pg', 'mysql2/promise', 'ioredis', 'redis', 'mongodb']) require(driver);
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
  'mysql2 pool.query': async ({ host: ip, port }) => {
    const mysql = require('mysql2/promise') as typeof import('mysql2/promise');
    const pool = mysql.createPool({ host: ip, port, user: 'app', database: 'app' });
    try {
      await pool.query('SELECT 1');
    } finally {
      void pool.end().catch(() => undefined);
    }
  },
  'ioredis GET': async ({ host: ip, port }) => {
    const { Redis } = require('ioredis') as typeof import('ioredis');
    const redis = new Redis({ host: ip, port, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.get('k');
    } finally {
      redis.disconnect();
    }
  },
  'node-redis GET': async ({ host: ip, port }) => {
    const { createClient } = require('redis') as typeof import('redis');
    const client = createClient({ socket: { host: ip, port, reconnectStrategy: false } });
    client.on('error', () => undefined);
    const connecting = client.connect().catch(() => undefined);
    try {
      await client.get('k');
    } finally {
      client.destroy();
      void connecting;
    }
  },
  'mongodb findOne': async ({ host: ip, port }) => {
    const { MongoClient } = require('mongodb') as typeof import('mongodb');
    const client = new MongoClient(`mongodb://${ip}:${String(port)}/?directConnection=true`);
    try {
      await client.db('app').collection('c').findOne({});
    } finally {
      void client.close();
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
    // Late by the deadline's doing, not the machine's: counted from when this loop could first act.
    const { error: again, lateMs } = await lateness(300, () => connect({ host: host.ip, port: PORT }));
    expect(isDeadlineExceeded(again)).toBe(true);
    expect(lateMs).toBeLessThan(50);
  });
});
