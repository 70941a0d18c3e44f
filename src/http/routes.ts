import { context } from '@opentelemetry/api';
import { getRPCMetadata, RPCType } from '@opentelemetry/core';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { patchModuleFiles, wrapMethod, type ModuleFilePatch } from '../hooks/index.js';
import { recordRoute } from './handlers.js';

/** Route naming installed, and the way back. */
export interface InstalledRouteNames {
  uninstall(): void;
}

// Fastify (4.x late, 5) publishes each routed request's handler on this tracing channel, with the
// route's pattern: `{ request, reply, route: { url, method } }`.
const FASTIFY_HANDLER_START = 'tracing:fastify.request.handler:start';

interface FastifyHandlerStart {
  request?: { raw?: IncomingMessage };
  route?: { url?: unknown };
}
interface RoutedRequest extends IncomingMessage {
  baseUrl?: unknown;
}
type Dispatch = (this: { path?: unknown }, req: RoutedRequest, ...rest: unknown[]) => unknown;

/**
 * Names each request by the route the app's framework matched (`GET /orders/:id`) without
 * OpenTelemetry's instrumentation for that framework: Fastify tells it on its diagnostics channel,
 * Express (4 and 5) as a route dispatches (`router`'s `Route#dispatch`, `req.baseUrl` + the route's
 * path). The route is handed to the http instrumentation as OpenTelemetry's instrumentations do
 * (the request's RPC metadata), so the server span ends named by it with `http.route`; and kept on
 * the request, so a request still stuck is exported under that name.
 */
export function installRouteNames(): InstalledRouteNames {
  const onFastify = (message: unknown): void => {
    const { request, route } = message as FastifyHandlerStart;
    if (request?.raw !== undefined && typeof route?.url === 'string') named(request.raw, route.url);
  };
  subscribe(FASTIFY_HANDLER_START, onFastify);
  const patched = patchModuleFiles([
    routeFile('router', 'lib/route.js'),
    routeFile('express', 'lib/router/route.js'),
    mountFile('router', 'index.js'),
    mountFile('express', 'lib/router/index.js'),
  ]);
  return {
    uninstall() {
      unsubscribe(FASTIFY_HANDLER_START, onFastify);
      patched.uninstall();
    },
  };
}

function routeFile(module: string, file: string): ModuleFilePatch {
  return {
    module,
    file,
    patch(exports) {
      const prototype = (exports as { prototype?: { dispatch?: Dispatch } }).prototype;
      if (typeof prototype?.dispatch !== 'function') return undefined;
      return wrapMethod(
        prototype,
        'dispatch',
        'lifeline-route',
        (dispatch: Dispatch) =>
          function (this: { path?: unknown }, req: RoutedRequest, ...rest: unknown[]): unknown {
            const mountedAt = typeof req.baseUrl === 'string' ? req.baseUrl : '';
            if (typeof this.path === 'string') named(req, mountedAt !== '' && patternMounts ? null : `${mountedAt}${this.path}`);
            return dispatch.call(this, req, ...rest);
          },
      );
    },
  };
}

// Set once a router is mounted under a path with parameters (or a pattern, a regex, a list):
// `req.baseUrl` then holds what matched (`/users/42/posts`), not the pattern, and a name made of it
// would differ per user. From then on, routes under a mount are not named.
let patternMounts = false;

/** The file where `use` mounts a router: its path is checked for parameters, as it is mounted. */
function mountFile(module: string, file: string): ModuleFilePatch {
  return {
    module,
    file,
    patch(exports) {
      // router 2 (Express 5): Router.prototype.use; Express 4: the router proto's own use.
      const owner = exports as { prototype?: { use?: unknown }; use?: unknown };
      const target = typeof owner.prototype?.use === 'function' ? owner.prototype : typeof owner.use === 'function' ? owner : undefined;
      if (target === undefined) return undefined;
      return wrapMethod(
        target,
        'use',
        'lifeline-route',
        (use: (...args: unknown[]) => unknown) =>
          function (this: unknown, ...args: unknown[]): unknown {
            const [path] = args;
            if (typeof path !== 'function' && !(typeof path === 'string' && !/[:*?()[\]+{}]/.test(path))) patternMounts = true;
            return use.apply(this, args);
          },
      );
    },
  };
}

function named(request: IncomingMessage, route: string | null): void {
  recordRoute(request, route);
  // The innermost route dispatched last: it is the one that serves the request.
  const rpc = getRPCMetadata(context.active());
  if (rpc?.type === RPCType.HTTP && route !== null) rpc.route = route;
}
