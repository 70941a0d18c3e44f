/**
 * The drain on SIGTERM (`trackHttpServers`): until it begins, only connections are noted; when it
 * begins, the responses in flight on them are found, told to close their connection and waited for,
 * and so is every request that arrives on an open connection during the drain.
 */
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { trackHttpServers } from '../../src/http/index.js';
import { runNode, type NodeResult } from '../support/node.js';

const tracked = trackHttpServers();
afterEach(() => {
  tracked.uninstall();
});

/**
 * A client in a process of its own (the drain leaves the process's own connections open): a GET of
 * /first, then of /hold on the same kept-alive connection; prints each answer's body, connection
 * header and whether the connection was reused, as a JSON line.
 */
function clientOfTwoCalls(port: number): Promise<NodeResult> {
  const source = `
    import { Agent, get } from 'node:http';
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const call = (path) => new Promise((resolve, reject) => {
      get({ host: '127.0.0.1', port: ${String(port)}, path, agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ body, connection: res.headers.connection, reused: res.req.reusedSocket }));
      }).on('error', reject);
    });
    console.log(JSON.stringify([await call('/first'), await call('/hold')]));
    agent.destroy();
  `;
  return runNode(['--input-type=module', '-e', source]);
}

describe('draining the servers on SIGTERM', () => {
  it('a response in flight when the drain begins, on a connection that served before, is told to close and waited for', async () => {
    let hold: (res: ServerResponse) => void = () => undefined;
    const holding = new Promise<ServerResponse>((resolve) => (hold = resolve));
    const server = createServer((req, res) => {
      if (req.url === '/hold') hold(res);
      else res.end('quick');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    try {
      // The connection serves a request before the drain, then holds one across its start.
      const client = clientOfTwoCalls(port);
      const held = await holding;
      expect(tracked.servers()).toContain(server);

      let drained = false;
      const draining = tracked.drain([server], 30_000).then(() => (drained = true));
      await new Promise((resolve) => setImmediate(resolve));
      expect(drained).toBe(false); // waits for the held response
      held.end('late');
      const result = await client;
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual([
        { body: 'quick', connection: 'keep-alive', reused: false },
        { body: 'late', connection: 'close', reused: true },
      ]);
      await draining;
      expect(drained).toBe(true);
      expect(server.listening).toBe(false);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
