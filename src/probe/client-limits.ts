import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { RequestBudget } from './request-budget.js';

/** Bytes of a response head, counted with its body as unsent until Node hands both to the kernel. */
const HEAD_BYTES = 160;

/**
 * What an overflowing connection may send: one probe request. A kubelet's is ~150 bytes; the rest is
 * room for headers a mesh adds. Held at most this (not 8 KiB of trickled headers and 64 KiB of
 * queued answers) per overflowing connection, thousands of them fit the watchdog thread's heap.
 */
const OVERFLOW_REQUEST_BYTES = 4_096;

interface Client {
  /** Requests it may send: `maxRequestsPerConnection`, or 1 when it overflows. */
  maxRequests: number;
  /** Bytes it may send (an overflowing connection's one request), and those it sent. */
  maxBytes: number;
  read: number;
  requests: number;
  /** Requests seen in what it sent, before Node parses them (ends of a request head counted). */
  sent: number;
  /** Bytes of answers not yet handed to the socket (pipelined answers wait in Node's queue). */
  unsent: number;
}

/**
 * What one client may hold. A prober sends one request per connection and reads its answer; a
 * client that pipelines thousands of requests and never reads would otherwise make Node queue an
 * answer per request (hundreds of MB over a few connections) while the probes of the kubelet wait.
 * Such a client is cut off (socket destroyed, its queue dropped) rather than answered more slowly.
 */
export class ClientLimits {
  static readonly #clients = new WeakMap<Socket, Client>();
  readonly #maxRequests: number;
  readonly #maxUnsent: number;
  readonly #budget: RequestBudget;

  constructor(maxRequests: number, maxUnsent: number, budget: RequestBudget) {
    this.#maxRequests = maxRequests;
    this.#maxUnsent = maxUnsent;
    this.#budget = budget;
  }

  /**
   * Counts what `socket` sends before Node parses it. Node parses a whole read (up to 64 KiB) at
   * once, even after the request that breaks a limit has the socket destroyed: 60 reads of
   * pipelined `GET`s (~1,800 each) cost the process 2 s of CPU that probes waited behind, more on a
   * loaded machine. A read that holds more requests than the client may still send is therefore
   * dropped unparsed and the client cut off; a probe sends one request, so it never comes near.
   */
  accept(socket: Socket, overflowing: boolean): void {
    const client: Client = {
      maxRequests: overflowing ? 1 : this.#maxRequests,
      maxBytes: overflowing ? OVERFLOW_REQUEST_BYTES : Infinity,
      read: 0,
      requests: 0,
      sent: 0,
      unsent: 0,
    };
    ClientLimits.#clients.set(socket, client);
    // A 'data' listener makes Node feed its parser from the socket's reads in JavaScript, after
    // listeners put before its own.
    socket.prependListener('data', (chunk: Buffer) => {
      client.read += chunk.length;
      client.sent = requestEnds(chunk, client.sent, client.maxRequests);
      if (client.sent > client.maxRequests || client.read > client.maxBytes) unparsed(socket);
    });
  }

  /** Whether to answer `req`; false once its client is cut off. */
  admit(req: IncomingMessage, res: ServerResponse): boolean {
    const socket = req.socket;
    // Node goes on parsing the rest of a chunk of pipelined requests after the socket is destroyed.
    if (socket.destroyed) return false;
    const client = ClientLimits.#clients.get(socket);
    if (client === undefined) return false; // every connection is accepted first
    client.requests++;
    // Kernel-accepted bytes are the client's to read; what is still in Node (the socket's buffer and
    // queued pipelined answers) is memory this process holds for it.
    if (client.requests > client.maxRequests || client.unsent + socket.writableLength > this.#maxUnsent) {
      socket.destroy();
      return false;
    }
    // The last one tells a well-behaved client to reconnect; Node closes the socket after it.
    // An overflowing connection's one request is its last.
    if (client.requests === client.maxRequests) res.shouldKeepAlive = false;
    this.#budget.take(socket);
    return true;
  }

  /** Counts `bodyBytes` (and a head) as unsent until `res` is handed to the socket. */
  static unsent(req: IncomingMessage, res: ServerResponse, bodyBytes: number): void {
    // An answer the socket is free for is written to it at once, where `writableLength` counts it;
    // only one queued behind another (pipelining) waits in Node's memory. Probes never pipeline, so
    // they skip the two listeners below.
    if ((req.socket as Socket & { _httpMessage?: unknown })._httpMessage === res) return;
    const client = ClientLimits.#clients.get(req.socket);
    if (client === undefined) return;
    const bytes = HEAD_BYTES + bodyBytes;
    client.unsent += bytes;
    let counted = true;
    const done = () => {
      if (counted) client.unsent -= bytes;
      counted = false;
    };
    res.once('finish', done);
    res.once('close', done);
  }
}

const REQUEST_END = Buffer.from('\r\n\r\n');

/**
 * `counted` plus the ends of request heads (a blank line) in `chunk`, counting no further than one
 * past `max`: each read is scanned once, so the cost is at most linear in what the client sends. One
 * split across two reads is not counted; the limit after parsing still holds for it.
 */
function requestEnds(chunk: Buffer, counted: number, max: number): number {
  let at = chunk.indexOf(REQUEST_END);
  while (at !== -1 && counted <= max) {
    counted++;
    at = chunk.indexOf(REQUEST_END, at + REQUEST_END.length);
  }
  return counted;
}

/**
 * Cuts `socket` off before Node's parser reads what it just received: a paused parser leaves the
 * read unparsed (Node then reports it as a client error, which `refuse` finds already closed).
 */
function unparsed(socket: Socket): void {
  (socket as Socket & { parser?: { pause?: () => void } | null }).parser?.pause?.();
  socket.destroy();
}
