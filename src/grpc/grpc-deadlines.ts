import { context } from '@opentelemetry/api';
import { isIP } from 'node:net';
import {
  contextWithDeadline,
  DeadlineExceededError,
  deadlineOf,
  DeadlineScope,
  DeadlineTimer,
  epochOf,
  monotonicNow,
  shrinks,
} from '../deadline/index.js';
import type { InboundDeadlines } from '../inbound/index.js';
import {
  callDeadline,
  callerDeadline,
  DeadlinePolicy,
  type CallDeadline,
  type DeadlinePolicyOptions,
  type RequestAttributes,
} from '../policy/index.js';

/**
 * The call options grpc-js hands to an interceptor (its `InterceptorOptions`), as far as deadlines
 * go: lifeline's interceptor is typed structurally, so the package does not depend on grpc-js.
 */
export interface GrpcCallOptions {
  /** grpc-js's `Deadline`: a `Date`, or epoch ms (`Infinity` for none). */
  deadline?: Date | number;
  /** The method called; a streaming one gets no headers bound (its metadata may come late by design). */
  method_definition?: { path?: string; requestStream?: boolean; responseStream?: boolean };
}
type GrpcDeadline = NonNullable<GrpcCallOptions['deadline']>;
type GrpcMethod = NonNullable<GrpcCallOptions['method_definition']>;

/** A grpc-js `InterceptingCall`, as far as the headers bound goes. */
interface GrpcCall {
  start: (this: GrpcCall, metadata: unknown, listener?: Partial<GrpcListener>) => void;
  cancelWithStatus(code: number, details: string): void;
}
interface GrpcListener {
  onReceiveMetadata(metadata: unknown): void;
  onReceiveMessage(message: unknown): void;
  onReceiveStatus(status: unknown): void;
}

/** gRPC's status DEADLINE_EXCEEDED. */
const DEADLINE_EXCEEDED = 4;

/**
 * The deadline a gRPC call of `method` should carry: the context's (or the policy's, when sooner),
 * unless the caller already set `own`, an earlier one, which is kept (`undefined`: nothing to change).
 * The headers bound (`untilHeaders`) applies to unary calls with no deadline of their own: a gRPC
 * server sends its response metadata with its first message, so a stream has no head to wait for.
 * `target` is the channel's target (`host:port`, maybe with a `dns:` scheme), for policy rules.
 */
export function grpcCallDeadline(
  policy: DeadlinePolicy,
  own: GrpcDeadline | undefined,
  method: GrpcMethod | undefined,
  target: () => string,
): CallDeadline | undefined {
  const deadline = callDeadline(policy, callerDeadline(context.active()), () => grpcAttributes(method?.path, target()));
  if (deadline === undefined) return undefined;
  const ownAt = toEpochMs(own);
  if (deadline.untilHeaders)
    return ownAt === undefined && method?.requestStream !== true && method?.responseStream !== true ? deadline : undefined;
  // The caller's own deadline is a wall time: compared with ours as the clocks stand now.
  return ownAt !== undefined && ownAt <= epochOf(deadline.monotonicAt) ? undefined : deadline;
}

/**
 * `call` (an `InterceptingCall`, not yet started) cancelled with `DEADLINE_EXCEEDED` at `at` unless
 * its response metadata or its status came first. No `grpc-timeout` is sent: the server is not
 * bounded by it. Everything but the listener is passed on as it is.
 */
export function boundUntilMetadata<T>(call: T, at: number, monotonicAt: number): T {
  const bounded = call as T & GrpcCall;
  const start = bounded.start;
  bounded.start = function (this: GrpcCall, metadata: unknown, listener?: Partial<GrpcListener>): void {
    const timer = new DeadlineTimer(at, expireCall, { call: bounded, at }, monotonicAt);
    start.call(this, metadata, {
      onReceiveMetadata(received: unknown): void {
        timer.cancel();
        listener?.onReceiveMetadata?.(received);
      },
      onReceiveMessage(message: unknown): void {
        listener?.onReceiveMessage?.(message);
      },
      onReceiveStatus(status: unknown): void {
        timer.cancel();
        listener?.onReceiveStatus?.(status);
      },
    });
  };
  return call;
}

function expireCall({ call, at }: { call: GrpcCall; at: number }): void {
  call.cancelWithStatus(DEADLINE_EXCEEDED, new DeadlineExceededError(at, 'headers').message);
}

/**
 * A grpc-js client interceptor that gives every call the deadline of the OpenTelemetry context (or
 * the policy's, whichever is sooner) as its gRPC deadline, unless the call set an earlier one, so
 * `grpc-timeout` goes on the wire and the call ends with `DEADLINE_EXCEEDED` at the deadline. A
 * unary call nothing bounds waits at most `headersTimeoutMs` for its response metadata.
 * `startLifeline` does this for every client without an interceptor; this is for a client of your own.
 * @example
 * ```ts
 * const client = new Greeter(address, credentials.createInsecure(), { interceptors: [grpcDeadlineInterceptor()] });
 * await withTimeout(500, () => sayHello(client, { name })); // DEADLINE_EXCEEDED by 500 ms
 * ```
 */
export function grpcDeadlineInterceptor(
  options: DeadlinePolicyOptions = {},
): <T>(callOptions: GrpcCallOptions, nextCall: (callOptions: GrpcCallOptions) => T) => T {
  const policy = new DeadlinePolicy(options);
  return (callOptions, nextCall) => {
    const deadline = grpcCallDeadline(policy, callOptions.deadline, callOptions.method_definition, () => '');
    if (deadline === undefined) return nextCall(callOptions);
    if (deadline.untilHeaders) return boundUntilMetadata(nextCall(callOptions), deadline.at, deadline.monotonicAt);
    return nextCall({ ...callOptions, deadline: grpcDeadline(deadline) });
  };
}

/**
 * Runs a gRPC server handler under the caller's deadline (`grpc-timeout`, read by grpc-js as the
 * call's deadline), as the `inbound` source, with the same trust rule and budget bounds as the HTTP
 * header. `peer` is the call's `getPeer()`, read only when a deadline came. An untrusted caller's
 * deadline is ignored here; grpc-js still ends that caller's own call at it.
 */
export function runWithInboundDeadline<T>(
  callDeadline: GrpcDeadline | undefined,
  inbound: InboundDeadlines,
  peer: () => string | undefined,
  handler: () => T,
): T {
  const callerAt = toEpochMs(callDeadline);
  if (callerAt === undefined || !(inbound.trust.fixed ?? inbound.trust.trusts(peerAddress(peer)))) return handler();
  // grpc-js gives the caller's deadline as a wall time: turned back into a budget once, here.
  const ms = inbound.budgetMs(callerAt - Date.now());
  const active = context.active();
  const current = deadlineOf(active);
  if (!shrinks(current, monotonicNow() + ms)) return handler();
  return context.with(contextWithDeadline(active, DeadlineScope.after(ms, 'inbound')), handler);
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

/**
 * The deadline grpc-js is given: a wall time, which it turns into a timeout at once; derived from
 * the monotonic reading now, so a wall-clock step since the deadline was made does not move it.
 */
export function grpcDeadline(deadline: CallDeadline): number {
  // grpc-js times it with a whole-millisecond Node timer against Date.now(), which fires up to a
  // millisecond before that wall time: rounded up, plus one, the call never ends before its deadline.
  return Math.ceil(epochOf(deadline.monotonicAt)) + 1;
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
