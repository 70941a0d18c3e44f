/**
 * The drain on SIGTERM (`trackHttpServers`): until it begins, only connections are noted; when it
 * begins, the responses in flight on them are found, told to close their connection and waited for,
 * and so is every request that arrives on an open connection during the drain.
 */
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { trackHttpServers, type TrackedServers } from '../../src/shutdown/index.js';
import { runNode, type NodeResult } from '../support/node.js';

let tracked: TrackedServers;
beforeEach(() => {
  tracked = trackHttpServers();
});
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

/** A server on loopback that holds the response to /hold (handed over by `holding`) and answers anything else with `body`. */
async function holdingServer(body: string): Promise<{ server: Server; port: number; holding: Promise<ServerResponse> }> {
  let hold: (res: ServerResponse) => void = () => undefined;
  const holding = new Promise<ServerResponse>((resolve) => (hold = resolve));
  const server = createServer((req, res) => {
    if (req.url === '/hold') hold(res);
    else res.end(body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port, holding };
}

describe('draining the servers on SIGTERM', () => {
  it('a response in flight when the drain begins, on a connection that served before, is told to close', async () => {
    const { server, port, holding } = await holdingServer('quick');
    try {
      // The connection serves a request before the drain, then holds one across its start.
      const client = clientOfTwoCalls(port);
      const held = await holding;
      expect(tracked.servers()).toContain(server);

      let drained = false;
      const draining = tracked.drain([server], 30_000).then(() => (drained = true));
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

  it('on a pipelining connection, a drain that begins while one response is written loses none queued behind it', async () => {
    const { server, port, holding } = await holdingServer('queued');
    try {
      // Both requests in one write, from a process of its own: the second waits behind the first.
      const source = `
        import { connect } from 'node:net';
        const socket = connect(${String(port)}, '127.0.0.1', () => {
          socket.write('GET /hold HTTP/1.1\\r\\nHost: h\\r\\n\\r\\nGET /queued HTTP/1.1\\r\\nHost: h\\r\\n\\r\\n');
        });
        let text = '';
        socket.setEncoding('latin1');
        socket.on('data', (chunk) => (text += chunk));
        socket.on('close', () => {
          const heads = text.split('HTTP/1.1 ').slice(1).map((answer) => /^connection: (.*)$/im.exec(answer)?.[1] ?? 'none');
          console.log(JSON.stringify(heads));
        });
      `;
      const client = runNode(['--input-type=module', '-e', source]);
      const held = await holding;
      const draining = tracked.drain([server], 30_000);
      held.end('late');
      const result = await client;
      expect(result.code, result.stderr).toBe(0);
      // Both answered. Told to close, the first would end the connection before the second is
      // written; the second was complete (so written as it was) before the drain began.
      expect(JSON.parse(result.stdout)).toEqual(['keep-alive', 'keep-alive']);
      await draining;
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
