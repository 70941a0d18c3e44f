import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { Installs, type Installed } from '../install/index.js';
import { BUDGET_HEADERS } from './budget-headers.js';
import { LOCAL_SOCKET } from './peer-trust.js';

/**
 * Node publishes every inbound node:http/https request here, synchronously, before the server
 * emits `'request'` — so before OpenTelemetry's http instrumentation extracts the deadline.
 */
const START = 'http.server.request.start';

/**
 * The caller's address of each request that carries a budget, by the request's `headers` object:
 * that object is the carrier the http instrumentation (`propagation.extract(ctx, request.headers)`)
 * and most frameworks hand to the propagator, which is never given the request itself. Weak: a
 * finished request leaves nothing.
 */
const peers = new WeakMap<object, string>();

function onStart(message: unknown): void {
  // A subscriber's throw would become an uncaught exception: nothing here may throw.
  try {
    const { request, socket, server } = message as { request?: IncomingMessage; socket?: Socket; server?: { address?: () => unknown } };
    // Only a request that carries a budget has its caller's address looked up and remembered: a
    // WeakMap entry for every request was a cost of every request (its GC too).
    if (request === undefined || !carriesBudget(request.headers)) return;
    const address = socket?.remoteAddress;
    const peer = address ?? (typeof server?.address?.() === 'string' ? LOCAL_SOCKET : undefined);
    if (peer !== undefined) peers.set(request.headers, peer);
  } catch {
    // an unknown peer is an untrusted one
  }
}

function carriesBudget(headers: IncomingMessage['headers']): boolean {
  for (const header of BUDGET_HEADERS) if (headers[header] !== undefined) return true;
  return false;
}

/**
 * Lets `DeadlinePropagator` see who sent each inbound node:http/https request, so that its
 * `trustInbound` rule can apply: without it only `trustInbound: 'all'` obeys `x-request-timeout-ms`.
 * `startLifeline` and register mode install it; call it yourself with an SDK of your own.
 * It listens on Node's `http.server.request.start` diagnostics channel and patches nothing.
 * Installs nest ({@link Installed}): recording stops when every install has been uninstalled, and
 * then only `trustInbound: 'all'` obeys inbound deadlines.
 * @example
 * ```ts
 * const trust = installInboundTrust();
 * const sdk = new NodeSDK({ textMapPropagator: new DeadlinePropagator({ trustInbound: ['10.0.0.0/8'] }), … });
 * // on shutdown: trust.uninstall();
 * ```
 */
export function installInboundTrust(): Installed {
  return installs.add(undefined);
}

const installs = new Installs<undefined>(() => {
  subscribe(START, onStart);
  return () => unsubscribe(START, onStart);
});

/** The recorded address of the request whose headers are `carrier` (`undefined`: not a request we saw). */
export function inboundPeerOf(carrier: unknown): string | undefined {
  return typeof carrier === 'object' && carrier !== null ? peers.get(carrier) : undefined;
}

/** Whether peers are being recorded at all: without it every carrier's peer is unknown. */
export function recordingInboundPeers(): boolean {
  return installs.size > 0;
}
