import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Server } from 'node:http';

/** The node:http servers that have served requests, for a graceful close. */
export interface TrackedServers {
  /** Each server seen so far, once. */
  servers(): Server[];
  uninstall(): void;
}

/**
 * Notes every node:http/https server as it serves its first request (Node's
 * `http.server.request.start` channel), so that on SIGTERM lifeline can stop the app's servers
 * accepting and let the requests in flight finish before the last flush. Servers are held weakly.
 */
export function trackHttpServers(): TrackedServers {
  const seen = new Set<WeakRef<Server>>();
  const known = new WeakSet<Server>();
  const onStart = (message: unknown): void => {
    const { server } = message as { server?: Server };
    if (server === undefined || known.has(server)) return;
    known.add(server);
    seen.add(new WeakRef(server));
  };
  subscribe('http.server.request.start', onStart);
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
    uninstall: () => {
      unsubscribe('http.server.request.start', onStart);
    },
  };
}

/**
 * Stops `servers` accepting connections and closes their idle keep-alive connections, then waits
 * for the requests in flight to finish; at `deadlineMs` whatever is left is closed.
 */
export async function closeServersGracefully(servers: readonly Server[], deadlineMs: number): Promise<void> {
  const closing = servers
    .filter((server) => server.listening)
    .map(
      (server) =>
        new Promise<void>((resolve) => {
          server.close(() => {
            resolve();
          });
          server.closeIdleConnections();
        }),
    );
  // While they drain, keep-alive connections that go idle are closed too.
  const sweep = setInterval(() => {
    for (const server of servers) server.closeIdleConnections();
  }, 50);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, deadlineMs);
  });
  try {
    await Promise.race([Promise.all(closing), late]);
  } finally {
    clearInterval(sweep);
    clearTimeout(timer);
    for (const server of servers) server.closeAllConnections();
  }
}
