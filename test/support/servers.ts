import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestServer {
  url: string;
  port: number;
  /** Requests the server has seen (the count, for assertions about what reached it). */
  requests: () => number;
  close: () => Promise<void>;
}

/** A real HTTP server on loopback with the given handler; `close()` drops open connections. */
export function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestServer> {
  return listening('http', (counted) => createServer(counted), handler);
}

/** Listens on loopback with a server `make` builds around a request-counting `handler`. */
async function listening(
  scheme: 'http' | 'https',
  make: (counted: (req: IncomingMessage, res: ServerResponse) => void) => Server,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestServer> {
  let seen = 0;
  const server = make((req, res) => {
    seen++;
    handler(req, res);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${scheme}://127.0.0.1:${port}`,
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

/** A self-signed certificate for 127.0.0.1 and localhost, made by openssl for this test run. */
export function selfSignedCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'lifeline-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A real HTTPS server on loopback with the given certificate and handler. */
export function serveTls(
  credentials: { key: string; cert: string },
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestServer> {
  return listening('https', (counted) => createHttpsServer(credentials, counted), handler);
}

/** A TCP server that accepts connections and never says a word: a TLS handshake never completes. */
export async function stallsHandshake(): Promise<TestServer> {
  const sockets = new Set<Socket>();
  let seen = 0;
  const server = createNetServer((socket) => {
    seen++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    requests: () => seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** Thinks for `ms` before it says anything, then answers `ok`: a slow upstream that does answer. */
export function answersAfter(ms: number) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const timer = setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'), ms);
    req.socket.on('close', () => {
      clearTimeout(timer);
    });
  };
}

/** Sends its head at once, then streams the body for `ms` (a chunk every 20 ms) and ends it with `end`. */
export function streamsFor(ms: number) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const started = Date.now();
    const timer = setInterval(() => {
      if (Date.now() - started < ms) {
        res.write('.');
        return;
      }
      clearInterval(timer);
      res.end('end');
    }, 20);
    req.socket.on('close', () => {
      clearInterval(timer);
    });
  };
}

/**
 * A DNS lookup that resolves every name to 127.0.0.1, for `http.Agent({ lookup })` and undici's
 * `connect: { lookup }`: a call to `api.example.com` reaches a loopback test server under that name.
 */
export function loopbackLookup(_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void): void {
  if (options.all === true) callback(null, [{ address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
}

/**
 * Reads the whole request body, noting when it ended (`bodyEndedAt`, ms since the epoch), then
 * answers `ok <bytes>` (`answers`) or never says a word: an upload endpoint, quick or stuck.
 */
export function readsBody(answers: boolean) {
  const state = { bodyEndedAt: 0 };
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      state.bodyEndedAt = Date.now();
      if (answers) res.writeHead(200, { 'content-type': 'text/plain' }).end(`ok ${String(bytes)}`);
    });
  };
  return Object.assign(handler, { state });
}
