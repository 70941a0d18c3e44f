import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Health, startProbeServer } from '../../src/index.js';
import { SELF_COMPONENT } from '../../src/health/index.js';
import { answeredByLifeline } from '../../src/probe/index.js';

/** A server on loopback that holds a port the way `handler` says. */
async function holder(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ port: number; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

async function asked(port: number): Promise<{ lifeline: boolean; ms: number }> {
  const started = performance.now();
  const lifeline = await answeredByLifeline(port, SELF_COMPONENT, '127.0.0.1', 500);
  return { lifeline, ms: performance.now() - started };
}

describe('answeredByLifeline: is the holder of a busy probe port a lifeline probe server?', () => {
  it('yes for a lifeline probe server, healthy or not', async () => {
    const health = new Health();
    const probes = await startProbeServer({ health, port: 0, host: '127.0.0.1' });
    try {
      health.registerLiveness('never-ticks'); // unhealthy until a round: /live answers 503
      expect((await asked(probes.port)).lifeline).toBe(true);
    } finally {
      await probes.close();
      health.close();
    }
  });

  it.each([
    ['a JSON answer of another kind', (_req: IncomingMessage, res: ServerResponse) => res.end('{"status":"pass"}')],
    ['a 1 MB page', (_req: IncomingMessage, res: ServerResponse) => res.end('x'.repeat(1_000_000))],
    [
      'a 1 MB page without a length',
      (_req: IncomingMessage, res: ServerResponse) => {
        res.write('x'.repeat(500_000));
        res.end('x'.repeat(500_000));
      },
    ],
    ['headers, then silence', (_req: IncomingMessage, res: ServerResponse) => res.writeHead(200).write('{')],
    [
      'a byte every 100 ms',
      (_req: IncomingMessage, res: ServerResponse) => {
        res.writeHead(200);
        const drip = setInterval(() => res.write(' '), 100);
        res.on('close', () => {
          clearInterval(drip);
        });
      },
    ],
    ['nothing at all', () => undefined],
  ])('no, and within the time given, for %s', async (_what, handler) => {
    const { port, server } = await holder(handler);
    try {
      const { lifeline, ms } = await asked(port);
      expect(lifeline).toBe(false);
      expect(ms).toBeLessThan(1_500); // 500 ms asked; a loaded machine may be late
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
