import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { isLoopback, splitHostPort } from '../net/index.js';

/** The names a client on this machine uses: not any loopback address, only the ones people type. */
const LOOPBACK_NAMES: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '::1']);

/** `localhost`, `127.0.0.1` or `[::1]`, with or without a port: the names a client on this machine uses. */
export function isLoopbackHost(host: string | undefined): boolean {
  const name = host === undefined ? undefined : splitHostPort(host)?.host;
  return name !== undefined && LOOPBACK_NAMES.has(name.toLowerCase());
}

/** A client on this machine, by its address and by the name it asked for (not a page rebinding its DNS name to loopback). */
export function fromThisMachine(req: IncomingMessage): boolean {
  return isLoopback(req.socket.remoteAddress) && isLoopbackHost(req.headers.host);
}

/** A connection from this host: from loopback, or to the address it came from (a server bound to the pod's own IP). */
export function fromThisHost(socket: Socket): boolean {
  return isLoopback(socket.remoteAddress) || (socket.remoteAddress !== undefined && socket.remoteAddress === socket.localAddress);
}
