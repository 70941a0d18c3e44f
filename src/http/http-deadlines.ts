import { context } from '@opentelemetry/api';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createRequire } from 'node:module';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { DeadlineExceededError, markEndedByDeadline } from '../deadline/index.js';
import { Installs, type Installed } from '../install/index.js';
import {
  CallBounds,
  callDeadline,
  callerDeadline,
  deadlineHeader,
  DeadlinePolicy,
  noAttributes,
  type CallDeadline,
  type DeadlinePolicyOptions,
  type RequestAttributes,
} from '../policy/index.js';

/** Node publishes every outgoing node:http/https request here, synchronously, in the caller's context. */
const CREATED = 'http.client.request.created';
/** …and here when the response head of one has been parsed (the body still to come). */
const RESPONSE = 'http.client.response.finish';

/** Deadlines a policy rule, the default or the headers bound gave, by request: the client span records them. */
const fromPolicy = new WeakMap<ClientRequest, CallDeadline>();

/**
 * Bounds every outgoing `http.request`/`https.request`/`get` — and so axios, got, node-fetch 2,
 * superagent, the AWS SDK's `NodeHttpHandler` and every other library built on them — by the
 * deadline in the OpenTelemetry context, or the policy's, whichever is sooner (the same rules as
 * the undici dispatcher). At the deadline the request is destroyed with a `DeadlineExceededError`
 * in whatever phase it is: queued in an `http.Agent`, resolving DNS, connecting, in the TLS
 * handshake, waiting for the response head or streaming the body. The destroyed socket is not
 * returned to the agent's pool. A request that ends first leaves no timer behind. A request
 * nothing bounds gets at most `headersTimeoutMs` to connect and, once it has been sent in full
 * (`'finish'`: the body, however slow, is not counted), as long for its response head, unless it
 * set a timeout of its own (`timeout`, `setTimeout`, the agent's `timeout`). The deadline goes to
 * the hosts of `deadlineHeaderHosts` as `x-request-timeout-ms` (through a forward proxy: to the
 * host of the target URL, not the proxy's).
 *
 * It listens on Node's `http.client.request.created` diagnostics channel: no module is patched, so
 * it also covers clients loaded before it, from ESM or CommonJS, and the http instrumentation of
 * OpenTelemetry is not needed (with it, client spans get the deadline attributes). Installing
 * again puts the new options in force until that install is uninstalled ({@link Installed}).
 * @example
 * ```ts
 * installHttpDeadlines({ defaultTimeoutMs: 30_000 });
 * await withTimeout(2_000, () => axios.get('https://api.example.com/items')); // ends by 2 s
 * ```
 */
export function installHttpDeadlines(options: DeadlinePolicyOptions = {}): Installed {
  return installs.add(new DeadlinePolicy(options)); // a bad policy throws before anything changes
}

const installs = new Installs<DeadlinePolicy>((policy) => {
  const onCreated = (message: unknown): void => {
    const { request } = message as { request: ClientRequest };
    bound(request, policy);
  };
  subscribe(CREATED, onCreated);
  // Only a headers bound needs to hear of response heads (a listener of 'response' would keep
  // node:http from dumping a response nobody reads).
  const headersBound = policy.headersTimeoutMs !== undefined;
  if (headersBound) subscribe(RESPONSE, onResponse);
  return () => {
    unsubscribe(CREATED, onCreated);
    if (headersBound) unsubscribe(RESPONSE, onResponse);
  };
});

/** The deadline a policy rule or the default gave `request`, when the context did not carry it. */
export function policyDeadlineOf(request: ClientRequest): CallDeadline | undefined {
  return fromPolicy.get(request);
}

function bound(request: ClientRequest, policy: DeadlinePolicy): void {
  const deadline = callDeadline(policy, callerDeadline(context.active()), policy.hasRules ? attributesOf(request) : noAttributes);
  if (deadline === undefined) return;
  if (deadline.fromPolicy) fromPolicy.set(request, deadline);
  if (!request.headersSent) {
    // Set here, not by the propagator: only the client knows the host, and the deadline applied.
    const header = deadlineHeader(policy, deadline, hostOf(request));
    if (header !== undefined) for (const name of policy.headerNames) request.setHeader(name, header);
  }
  requests.arm(request, deadline);
}

// The thunks the policy asks for, made apart from `bound`: a closure in it made every request
// allocate the variables it captures, whether or not the policy called it.
function attributesOf(request: ClientRequest): () => RequestAttributes {
  return () => requestAttributes(request);
}
function hostOf(request: ClientRequest): () => string | undefined {
  return () => targetOf(request).host;
}

function onResponse(message: unknown): void {
  requests.headArrived((message as { request: ClientRequest }).request);
}

/** The deadline lifecycle of every bounded request; what is node:http's own is below. */
const requests = new CallBounds<ClientRequest>({
  // The caller chose how long this request may take (axios `timeout`, `http.request({ timeout })`).
  ownTimeout: hasOwnTimeout,
  steppedAside: (request) => {
    fromPolicy.delete(request); // its span records no deadline the request did not get
  },
  // Connected, still sending (an upload): not counted; `'finish'` arms the wait for the head.
  sending: isConnected,
  end: endRequest,
});

function endRequest(request: ClientRequest, error: DeadlineExceededError): void {
  markEndedByDeadline(request);
  const response = (request as ClientRequest & { res?: IncomingMessage | null }).res;
  if (response) {
    markEndedByDeadline(response);
    // The response first: a caller streaming the body must see the deadline, not a reset socket.
    response.destroy(error);
  }
  request.destroy(error);
  if (request.socket) return;
  // No socket yet: a destroyed request would fail only once it gets one. Queued in its agent
  // (maxSockets reached), it leaves the queue; waiting on a socket made asynchronously (a proxy
  // tunnel, an agent-base agent) it keeps waiting, so the socket handed over later is destroyed
  // quietly. Either way it fails now, as an agent reports a connect that failed.
  if (!leaveAgentQueue(request)) {
    (request as unknown as { onSocket: (socket?: { destroy(): void }) => void }).onSocket = (socket) => {
      socket?.destroy();
    };
  }
  (ClientRequestPrototype.onSocket as unknown as (socket: undefined, err: Error) => void).call(request, undefined, error);
}

/** A socket the request can send on: TCP connected and, for TLS, past the handshake. */
function isConnected(request: ClientRequest): boolean {
  const socket = request.socket;
  if (socket === null || socket.connecting) return false;
  const tls = socket as { encrypted?: boolean; _secureEstablished?: boolean };
  return tls.encrypted !== true || tls._secureEstablished === true;
}

/**
 * Whether the caller gave the request a timeout of its own: `http.request({ timeout })`, or
 * `request.setTimeout(ms)` / `socket.setTimeout(ms)` (axios `timeout`, the AWS SDK's socket
 * timeout), seen on the socket once the request has one. An agent's `timeout` (Node's global agents
 * have 5 s) is the idle timeout of its sockets, which ends no request: not one. `0` is no timeout.
 */
function hasOwnTimeout(request: ClientRequest): boolean {
  const { agent, timeout } = request as ClientRequest & { agent?: { options?: { timeout?: unknown } }; timeout?: number };
  if ((timeout ?? 0) > 0) return true;
  const socketTimeout = request.socket?.timeout ?? 0;
  return socketTimeout > 0 && socketTimeout !== (agent?.options?.timeout ?? 0);
}

const ClientRequestPrototype = (createRequire(import.meta.url)('node:http') as typeof import('node:http')).ClientRequest.prototype;

/** Removes `request` from its agent's queue of requests waiting for a socket; false if not queued. */
function leaveAgentQueue(request: ClientRequest): boolean {
  const agent = (request as ClientRequest & { agent?: { requests?: Record<string, ClientRequest[] | undefined> } }).agent;
  const queues = agent?.requests ?? {};
  for (const [name, queue] of Object.entries(queues)) {
    const index = queue?.indexOf(request) ?? -1;
    if (queue === undefined || index === -1) continue;
    queue.splice(index, 1);
    // The agent deletes a drained queue and, when a socket frees, takes [0] of every queue it has.
    if (queue.length === 0) Reflect.deleteProperty(queues, name);
    return true;
  }
  return false;
}

const DEFAULT_PORTS: Readonly<Record<string, number>> = { 'http:': 80, 'https:': 443 };

/** A request path in absolute form (`GET http://api.example.com/x`): sent to a forward proxy. */
const ABSOLUTE_FORM = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * The server a request is for: its host, or through a plain-HTTP forward proxy (path in absolute
 * form) the host of the target URL — the proxy only passes the request on.
 */
function targetOf(request: ClientRequest): { host: string; path: string; protocol: string; port: string | undefined } {
  if (ABSOLUTE_FORM.test(request.path)) {
    try {
      const url = new URL(request.path);
      return {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        path: url.pathname + url.search,
        protocol: url.protocol,
        port: url.port === '' ? undefined : url.port,
      };
    } catch {
      // not a URL after all: judge the request as it goes
    }
  }
  const host = request.getHeader('host');
  const port = typeof host === 'string' ? /:(\d+)$/.exec(host)?.[1] : undefined;
  return { host: request.host, path: request.path, protocol: request.protocol, port };
}

/** The semantic-convention attributes a policy rule can match, from the request. */
function requestAttributes(request: ClientRequest): RequestAttributes {
  const { host, path, protocol, port } = targetOf(request);
  const query = path.indexOf('?');
  const attributes: Record<string, string | number> = {
    'http.request.method': request.method,
    'url.path': query === -1 ? path : path.slice(0, query),
    'server.address': host,
    'url.scheme': protocol.slice(0, -1),
  };
  const serverPort = port === undefined ? DEFAULT_PORTS[protocol] : Number(port);
  if (serverPort !== undefined) attributes['server.port'] = serverPort;
  return attributes;
}
