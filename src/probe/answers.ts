import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ClientLimits } from './client-limits.js';

/** Only GET and HEAD are served; anything else gets 405 here. Returns whether to go on. */
export function readOnly(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method === 'GET' || req.method === 'HEAD') return true;
  res.setHeader('allow', 'GET, HEAD');
  send(req, res, 405, { error: 'method not allowed' });
  return false;
}

/** Answers `req` with `code` and a JSON body, counting it as unsent while Node queues it. */
export function send(req: IncomingMessage, res: ServerResponse, code: number, body: object | Buffer): void {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  ClientLimits.unsent(req, res, req.method === 'HEAD' ? 0 : bytes.byteLength);
  res.writeHead(code, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': bytes.byteLength });
  res.end(req.method === 'HEAD' ? undefined : bytes);
}

/** Malformed, oversized or too-slow requests get a bare status line and a closed socket: no detail. */
export function refuse(err: NodeJS.ErrnoException, socket: Socket): void {
  if (socket.writable && (socket as Socket & { _httpMessage?: unknown })._httpMessage === undefined) {
    const status =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? '408 Request Timeout'
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? '431 Request Header Fields Too Large'
          : '400 Bad Request';
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  }
  socket.destroySoon();
}
