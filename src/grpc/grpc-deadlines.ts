import { context } from '@opentelemetry/api';
import { isIP } from 'node:net';
import { contextWithDeadline, deadlineOf, DeadlineScope } from '../deadline/index.js';
import type { InboundDeadlines } from '../inbound/index.js';
import { callDeadline, DeadlinePolicy, type CallDeadline, type DeadlinePolicyOptions, type RequestAttributes } from '../policy/index.js';

/** grpc-js's `Deadline`: a `Date`, or epoch ms (`Infinity` for none). */
type GrpcDeadline = Date | number;

/** The call options grpc-js hands to interceptors (`InterceptorOptions`), as far as deadlines go. */
interface GrpcCallOptions {
  deadline?: GrpcDeadline;
  method_definition?: { path?: string };
}

/**
 * The deadline a gRPC call to `path` should carry: the context's (or the policy's, when sooner),
 * unless the caller already set `own`, an earlier one, which is kept (`undefined`: nothing to change).
 * `target` is the channel's target (`host:port`, maybe with a `dns:` scheme), for policy rules.
 */
export function grpcCallDeadline(policy: DeadlinePolicy, own: GrpcDeadline | undefined, path: string | undefined, target: () => string): CallDeadline | undefined {
  const deadline = callDeadline(policy, deadlineOf(context.active()), () => grpcAttributes(path, target()));
  if (deadline === undefined) return undefined;
  const ownAt = toEpochMs(own);
  return ownAt !== undefined && ownAt <= deadline.at ? undefined : deadline;
}

/**
 * A grpc-js client interceptor that gives every call the deadline of the OpenTelemetry context (or
 * the policy's, whichever is sooner) as its gRPC deadline, unless the call set an earlier one, so
 * `grpc-timeout` goes on the wire and the call ends with `DEADLINE_EXCEEDED` at the deadline.
 * `startLifeline` does this for every client without an interceptor; this is for a client of your own.
 * @example
 * ```ts
 * const client = new Greeter(address, credentials.createInsecure(), { interceptors: [grpcDeadlineInterceptor()] });
 * await withTimeout(500, () => sayHello(client, { name })); // DEADLINE_EXCEEDED by 500 ms
 * ```
 */
export function grpcDeadlineInterceptor(options: DeadlinePolicyOptions = {}): <T>(callOptions: GrpcCallOptions, nextCall: (callOptions: GrpcCallOptions) => T) => T {
  const policy = new DeadlinePolicy(options);
  return (callOptions, nextCall) => {
    const deadline = grpcCallDeadline(policy, callOptions.deadline, callOptions.method_definition?.path, () => '');
    return nextCall(deadline === undefined ? callOptions : { ...callOptions, deadline: deadline.at });
  };
}

/**
 * Runs a gRPC server handler under the caller's deadline (`grpc-timeout`, read by grpc-js as the
 * call's deadline), as the `inbound` source, with the same trust rule and budget bounds as the HTTP
 * header. `peer` is the call's `getPeer()`, read only when a deadline came. An untrusted caller's
 * deadline is ignored here; grpc-js still ends that caller's own call at it.
 */
export function runWithInboundDeadline<T>(callDeadline: GrpcDeadline | undefined, inbound: InboundDeadlines, peer: () => string | undefined, handler: () => T): T {
  const callerAt = toEpochMs(callDeadline);
  if (callerAt === undefined || !(inbound.trust.fixed ?? inbound.trust.trusts(peerAddress(peer)))) return handler();
  const now = Date.now();
  const at = inbound.deadlineAt(callerAt - now, now);
  const active = context.active();
  const current = deadlineOf(active);
  if (current !== undefined && current.at <= at) return handler();
  return context.with(contextWithDeadline(active, new DeadlineScope(at, 'inbound')), handler);
}

/**
 * The address in a grpc-js peer string: `host:port` with an unbracketed IPv6 host (`::1:50051`),
 * a bracketed one, or a bare address; `undefined` for `unknown` and anything else.
 */
function peerAddress(peer: () => string | undefined): string | undefined {
  let text: string | undefined;
  try {
    text = peer();
  } catch {
    return undefined; // an unknown peer is an untrusted one
  }
  if (typeof text !== 'string') return undefined;
  const hostPort = /^\[?([^\]]*?)\]?:\d+$/.exec(text);
  const address = hostPort?.[1] ?? text;
  return isIP(address.replace(/%.*$/, '')) !== 0 ? address : isIP(text) !== 0 ? text : undefined;
}

function toEpochMs(deadline: GrpcDeadline | undefined): number | undefined {
  const ms = deadline instanceof Date ? deadline.getTime() : deadline;
  return typeof ms === 'number' && Number.isFinite(ms) ? ms : undefined;
}

/** What a policy rule can match on a gRPC call: its method path and the channel's host and port. */
function grpcAttributes(path: string | undefined, target: string): RequestAttributes {
  const attributes: Record<string, string | number> = { 'url.scheme': 'grpc' };
  if (path !== undefined) attributes['url.path'] = path;
  const hostPort = /^(?:[a-z]+:(?:\/\/\/?)?)?(\[[^\]]+\]|[^:/]+)(?::(\d+))?$/i.exec(target);
  if (hostPort?.[1] !== undefined) attributes['server.address'] = hostPort[1].replace(/^\[|\]$/g, '');
  if (hostPort?.[2] !== undefined) attributes['server.port'] = Number(hostPort[2]);
  return attributes;
}
