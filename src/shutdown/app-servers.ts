import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { unmapped } from '../net/index.js';

/**
 * How long the drained servers must have had no request in flight before their idle keep-alive
 * connections are closed. A client may be writing its next request on a connection the server sees
 * as idle, and closing it then loses that request; a client that just had an answer sends again
 * within this (and is answered, and told to close), one quiet for this long is unlikely to be.
 */
const QUIET_MS = 250;
const SWEEP_MS = 25;

/** The node:http servers that have served requests, for a graceful close. */
export interface TrackedServers {
  /** Each server seen so far, once. */
  servers(): Server[];
  /**
   * Stops `servers` accepting connections and lets every request they accepted finish, those that
   * arrive on their open connections meanwhile too; at `deadlineMs` whatever is left is closed.
   * Each answer from then on says `connection: close` — except to the process's own connections
   * (an app calling its own API over a keep-alive pool), which must keep working, since a new
   * connection is refused now — and idle connections are closed only once no request of any of
   * `servers` has been in flight for a while.
   */
  drain(servers: readonly Server[], deadlineMs: number): Promise<void>;
  uninstall(): void;
}

interface ServerState {
  /** Until a drain: the server's open connections that have carried a request. */
  readonly connections: Set<Socket>;
  /**
   * Each response not yet closed, with its connection, that a drain waits for: from a drain on,
   * those being answered when it began and every one since; before it, those queued behind
   * another on a pipelining connection.
   */
  readonly inFlight: Map<ServerResponse, Socket>;
  lastEndedAt: number;
  draining: boolean;
}

/**
 * The response a connection is writing, if any: node:http gives a connection its current response
 * as `_httpMessage` (one queued behind it, on a pipelining connection, is followed from its start).
 * Read defensively: it is not documented.
 */
function responseOn(socket: Socket): ServerResponse | undefined {
  // Told apart by shape: a value import of node:http's ServerResponse here made register mode load
  // node:http2 and TLS at start-up (test/register/lazy-modules.test.ts).
  const response = (socket as { _httpMessage?: { writableFinished?: unknown; setHeader?: unknown } | null })._httpMessage;
  if (typeof response?.setHeader !== 'function' || response.writableFinished !== false) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment -- node:http's own response object, by the shape above
  return response as ServerResponse;
}

/** `::ffff:127.0.0.1` (an IPv4 peer of a dual-stack socket) and `127.0.0.1` are one address. */
function endpoint(address: string | undefined, port: number | undefined): string | undefined {
  if (address === undefined || port === undefined) return undefined;
  return `${unmapped(address)}:${port}`;
}

/**
 * Notes every node:http/https server as it serves its first request (Node's
 * `http.server.request.start` channel) and the requests it has in flight, so that on SIGTERM
 * lifeline can stop the app's servers accepting and let those requests finish before the last
 * flush; and this process's own client connections (`net.client.socket`), to tell them apart from
 * other clients' during the drain. Servers are held weakly.
 */
export function trackHttpServers(): TrackedServers {
  const seen = new Set<WeakRef<Server>>();
  const states = new WeakMap<Server, ServerState>();
  // Local endpoint → remote endpoint of each connected client socket of this process.
  const ownClients = new Map<string, string>();
  const stateOf = (server: Server): ServerState => {
    let state = states.get(server);
    if (state === undefined) {
      state = { connections: new Set(), inFlight: new Map(), lastEndedAt: 0, draining: false };
      states.set(server, state);
      seen.add(new WeakRef(server));
    }
    return state;
  };
  /** Whether the peer of this server-side socket is a client socket of this very process. */
  const isOwn = (socket: Socket): boolean => {
    const remote = endpoint(socket.remoteAddress, socket.remotePort);
    return remote !== undefined && ownClients.get(remote) === endpoint(socket.localAddress, socket.localPort);
  };
  /** Asks the client to leave after this answer, so that no idle connection of its needs closing. */
  const askToLeave = (response: ServerResponse, socket: Socket): void => {
    if (response.headersSent || isOwn(socket)) return;
    response.setHeader('connection', 'close');
  };
  /** A response the drain waits for, followed to its end (see `ServerState.inFlight`). */
  const follow = (state: ServerState, response: ServerResponse, socket: Socket): void => {
    if (state.inFlight.has(response)) return;
    state.inFlight.set(response, socket);
    response.once('close', () => {
      state.inFlight.delete(response);
      state.lastEndedAt = performance.now();
    });
  };
  // Until a drain, only connections are noted, once each: a listener per request cost ~5 µs of
  // every request (its removal goes through the context binding OpenTelemetry puts on responses).
  const onStart = (message: unknown): void => {
    const { server, response, socket } = message as { server?: Server; response?: ServerResponse; socket?: Socket };
    if (server === undefined || response === undefined || socket === undefined) return;
    const state = stateOf(server);
    if (state.draining) {
      follow(state, response, socket);
      askToLeave(response, socket);
      return;
    }
    if (!state.connections.has(socket)) note(state, socket);
    // Node gives the connection its response after this channel: one it already has is another's,
    // and this response waits behind it (pipelining), where a drain would not find it.
    const current = (socket as { _httpMessage?: unknown })._httpMessage;
    if (current != null && current !== response) follow(state, response, socket);
  };
  // Apart from onStart, which then has no closure: one there made every request allocate what it captures.
  const note = (state: ServerState, socket: Socket): void => {
    state.connections.add(socket);
    socket.once('close', () => state.connections.delete(socket));
  };
  const onClientSocket = (message: unknown): void => {
    const { socket } = message as { socket: Socket };
    socket.once('connect', () => {
      const local = endpoint(socket.localAddress, socket.localPort);
      const remote = endpoint(socket.remoteAddress, socket.remotePort);
      if (local === undefined || remote === undefined) return; // a pipe: no server of ours sees a port
      ownClients.set(local, remote);
      socket.once('close', () => {
        if (ownClients.get(local) === remote) ownClients.delete(local);
      });
    });
  };
  subscribe('http.server.request.start', onStart);
  subscribe('net.client.socket', onClientSocket);
  return {
    servers: () => {
      const alive: Server[] = [];
      for (const ref of seen) {
        const server = ref.deref();
        if (server === undefined) seen.delete(ref);
        else alive.push(server);
      }
      return alive;
    },
    drain: async (servers, deadlineMs) => {
      const startedAt = performance.now();
      const draining = servers.filter((server) => server.listening).map((server) => ({ server, state: stateOf(server) }));
      for (const { state } of draining) {
        state.draining = true;
        for (const socket of state.connections) {
          const response = responseOn(socket);
          if (response !== undefined) follow(state, response, socket);
        }
        state.connections.clear();
        // Only a connection's last response says close: one said earlier, on a pipelining
        // connection, would end it before the responses queued behind it are written.
        // Those queued behind the one being written were followed as they started, in order.
        const last = new Map<Socket, ServerResponse>();
        for (const [response, socket] of state.inFlight) {
          if (!last.has(socket) || responseOn(socket) !== response) last.set(socket, response);
        }
        for (const [socket, response] of last) askToLeave(response, socket);
      }
      // Connections the kernel completed but the loop has not taken yet would be reset by the close
      // (an inner call that had just connected, among them): the next turn's poll takes them.
      await new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
      const closed = draining.map(
        ({ server }) =>
          new Promise<void>((resolve) => {
            // net.Server's close only stops accepting; http.Server's would also close the idle
            // connections at once, under clients that may be writing on them.
            NetServer.prototype.close.call(server, () => {
              resolve();
            });
          }),
      );
      // An inner call may go from any of the servers to any other: all of them must be quiet.
      const sweep = setInterval(() => {
        const now = performance.now();
        const quiet = draining.every(({ state }) => state.inFlight.size === 0 && now - Math.max(state.lastEndedAt, startedAt) >= QUIET_MS);
        if (quiet) for (const { server } of draining) server.closeIdleConnections();
      }, SWEEP_MS);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, deadlineMs);
      });
      try {
        await Promise.race([Promise.all(closed), late]);
      } finally {
        clearInterval(sweep);
        clearTimeout(timer);
        for (const { server } of draining) server.closeAllConnections();
      }
    },
    uninstall: () => {
      unsubscribe('http.server.request.start', onStart);
      unsubscribe('net.client.socket', onClientSocket);
    },
  };
}
