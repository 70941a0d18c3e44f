import type { IncomingMessage, Server } from 'node:http';

/** What a framework leaves on a request it routed: Express's `req.route` (4 and 5), its layers' handlers. */
interface RoutedRequest {
  readonly route?: { readonly stack?: unknown; readonly path?: unknown };
  readonly baseUrl?: unknown;
}
interface RouteLayer {
  readonly method?: string;
  readonly handle?: unknown;
}

/**
 * The functions that serve `request`, innermost first: the handler of the route a framework matched
 * (Express sets `req.route`), then the server's own `request` listeners. Read when a stuck request
 * is exported, never per request; OpenTelemetry's wrappers are seen through (`__original`).
 */
export function requestHandlers(request: IncomingMessage): ((...args: never[]) => unknown)[] {
  const handlers: ((...args: never[]) => unknown)[] = [];
  const stack = (request as RoutedRequest).route?.stack;
  if (Array.isArray(stack)) {
    const layers = stack as readonly (RouteLayer | undefined)[];
    const method = request.method?.toLowerCase();
    // The last layer for the method is the handler; those before it are the route's middleware.
    for (let i = layers.length - 1; i >= 0; i--) {
      const layer = layers[i];
      if (layer?.method !== undefined && layer.method !== method) continue;
      if (typeof layer?.handle === 'function') handlers.push(unwrapped(layer.handle as (...args: never[]) => unknown));
      break;
    }
  }
  const server = (request.socket as { server?: Server } | null)?.server;
  if (server !== undefined && typeof server.listeners === 'function')
    for (const listener of server.listeners('request')) handlers.push(unwrapped(listener as (...args: never[]) => unknown));
  return handlers;
}

function unwrapped(fn: (...args: never[]) => unknown): (...args: never[]) => unknown {
  let inner = fn;
  // shimmer (OpenTelemetry's wrapper) keeps what it wrapped; a few levels at most.
  for (let depth = 0; depth < 4; depth++) {
    const original = (inner as { __original?: unknown }).__original;
    if (typeof original !== 'function') break;
    inner = original as (...args: never[]) => unknown;
  }
  return inner;
}

// Routes a framework told of (see installRouteNames), by request: gone with the request. `null`:
// the route is known to be no pattern (a router mounted under a path with parameters).
const recorded = new WeakMap<IncomingMessage, string | null>();

/** Keeps the route a framework matched for `request` (`null`: none to name it by), for {@link requestRoute}. */
export function recordRoute(request: IncomingMessage, route: string | null): void {
  recorded.set(request, route);
}

/**
 * The route a framework matched for `request` while it is still served (`/orders/:id`), which the
 * http instrumentation records only when the request ends: the one a framework told of (Fastify's
 * diagnostics channel, Express's route dispatch), else Express's `req.baseUrl` + `req.route.path`.
 */
export function requestRoute(request: IncomingMessage): string | undefined {
  const told = recorded.get(request);
  if (told !== undefined) return told ?? undefined;
  const { route, baseUrl } = request as RoutedRequest;
  const path = route?.path;
  if (typeof path !== 'string') return undefined;
  return `${typeof baseUrl === 'string' ? baseUrl : ''}${path}`;
}
