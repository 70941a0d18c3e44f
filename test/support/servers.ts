import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestServer {
  url: string;
  port: number;
  /** Requests the server has seen (the count, for assertions about what reached it). */
  requests: () => number;
  close: () => Promise<void>;
}

/** A real HTTP server on loopback with the given handler; `close()` drops open connections. */
export async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestServer> {
  let seen = 0;
  const server: Server = createServer((req, res) => {
    seen++;
    handler(req, res);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests: () => seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** Accepts the request and never answers: the call waits for headers forever. */
export const neverAnswers = (): void => undefined;

/** Answers at once with a small body. */
export function answersOk(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
}

/** Sends headers and a first chunk, then stalls the body forever. */
export function stallsBody(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
  res.write('first chunk;');
}

/** Trickles the body one byte every `everyMs`: always alive, never done in time. */
export function tricklesBody(everyMs: number) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const timer = setInterval(() => res.write('.'), everyMs);
    req.socket.on('close', () => {
      clearInterval(timer);
    });
  };
}
