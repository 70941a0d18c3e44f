import { SpanKind, trace } from '@opentelemetry/api';
import {
  InstrumentationBase,
  InstrumentationNodeModuleDefinition,
  InstrumentationNodeModuleFile,
  isWrapped,
  type InstrumentationConfig,
} from '@opentelemetry/instrumentation';
import { createRequire } from 'node:module';
import { boundUntilMetadata, grpcCallDeadline, grpcDeadline, runWithInboundDeadline } from './grpc-deadlines.js';
import { InboundDeadlines, type InboundDeadlineOptions } from '../inbound/index.js';
import { DeadlinePolicy, type CallDeadline, type DeadlinePolicyOptions } from '../policy/index.js';
import { recordDeadline } from '../deadline-spans/index.js';

/**
 * Options of {@link GrpcDeadlineInstrumentation}. `trustInbound`, `minInboundMs` and `maxInboundMs`
 * apply to inbound `grpc-timeout` by the caller's address (`call.getPeer()`), as for HTTP.
 */
export interface GrpcDeadlineInstrumentationConfig extends InstrumentationConfig, DeadlinePolicyOptions, InboundDeadlineOptions {}

interface ServerCall {
  getDeadline?: () => Date | number;
  getPeer?: () => string;
}
type Handler = (this: unknown, call: ServerCall, callback?: unknown) => unknown;
type AddService = (this: unknown, service: Record<string, { originalName?: string } | undefined>, implementation: unknown) => void;
type GetInterceptingCall = (
  this: unknown,
  interceptorArgs: unknown,
  methodDefinition: { path?: string; requestStream?: boolean; responseStream?: boolean } | undefined,
  options: { deadline?: Date | number },
  channel: { getTarget?: () => string },
) => unknown;
interface GrpcModule {
  Server: { prototype: { addService: AddService } };
}
interface InterceptorsModule {
  getInterceptingCall: GetInterceptingCall;
}

const SUPPORTED = ['^1.0.0'];

/**
 * Deadlines for `@grpc/grpc-js`, with nothing to change in the app. Client calls get the context's
 * deadline (or the policy's) as their gRPC `deadline` unless they set an earlier one, so
 * `grpc-timeout` goes on the wire and the call ends with `DEADLINE_EXCEEDED`; a unary call nothing
 * bounds waits at most `headersTimeoutMs` for its response metadata. Handlers of services
 * added with `server.addService` run under a trusted caller's deadline (`source` `inbound`, within
 * `minInboundMs`..`maxInboundMs`; `trustInbound` as for HTTP, `'private'` by default). `startLifeline`
 * includes it; add it to your own NodeSDK's instrumentations otherwise.
 */
// No private members: the base class patches already-loaded modules from inside its constructor,
// before a subclass's private members exist.
export class GrpcDeadlineInstrumentation extends InstrumentationBase<GrpcDeadlineInstrumentationConfig> {
  constructor(config: GrpcDeadlineInstrumentationConfig = {}) {
    // Bad options throw before anything is patched.
    new InboundDeadlines(config);
    new DeadlinePolicy(config);
    super('lifeline-grpc-deadlines', '0.1.0', config);
  }

  /** The policy of the current config (re-read after `setConfig`). */
  private policy(): DeadlinePolicy {
    const config = this.getConfig();
    let policy = policies.get(config);
    if (policy === undefined) {
      policy = new DeadlinePolicy(config);
      policies.set(config, policy);
    }
    return policy;
  }

  /**
   * What it patches in `@grpc/grpc-js` 1.x: `Server.prototype.addService` (handlers run under the
   * caller's deadline) and the client's intercepting call (calls get the context's deadline).
   */
  protected init(): InstrumentationNodeModuleDefinition {
    return new InstrumentationNodeModuleDefinition(
      '@grpc/grpc-js',
      SUPPORTED,
      (exports: GrpcModule) => {
        this._wrap(exports.Server.prototype, 'addService', (original: AddService) => this.addService(original));
        // grpc-js is often loaded before any hook exists (OpenTelemetry's SDK loads it for its gRPC
        // exporter), and its internal files are never required again: patch the one we need now.
        const interceptors = internalFile(exports, './client-interceptors.js') as InterceptorsModule | undefined;
        if (interceptors !== undefined) this.patchInterceptors(interceptors);
        return exports;
      },
      (exports: GrpcModule) => {
        this._unwrap(exports.Server.prototype, 'addService');
        return exports;
      },
      [
        new InstrumentationNodeModuleFile(
          '@grpc/grpc-js/build/src/client-interceptors.js',
          SUPPORTED,
          (exports: InterceptorsModule) => {
            this.patchInterceptors(exports);
            return exports;
          },
          (exports: InterceptorsModule) => {
            this._unwrap(exports, 'getInterceptingCall');
            return exports;
          },
        ),
      ],
    );
  }

  private patchInterceptors(exports: InterceptorsModule): void {
    if (isWrapped(exports.getInterceptingCall)) return;
    this._wrap(exports, 'getInterceptingCall', (original: GetInterceptingCall) => this.getInterceptingCall(original));
    patchedInterceptors.add(exports);
  }

  /** Also unpatches the internal file patched through the main module, which the base class does not know of. */
  override disable(): void {
    super.disable();
    for (const exports of patchedInterceptors) {
      if (isWrapped(exports.getInterceptingCall)) this._unwrap(exports, 'getInterceptingCall');
    }
    patchedInterceptors.clear();
  }

  // Every client call of any kind passes here, in the caller's context, with its call options.
  private getInterceptingCall(original: GetInterceptingCall): GetInterceptingCall {
    const policyOf = (): DeadlinePolicy => this.policy();
    return function getInterceptingCall(interceptorArgs, methodDefinition, options, channel) {
      const policy = policyOf();
      const deadline = grpcCallDeadline(policy, options.deadline, methodDefinition, () => channel.getTarget?.() ?? '');
      if (deadline === undefined) return original.call(this, interceptorArgs, methodDefinition, options, channel);
      if (deadline.fromPolicy) recordOnGrpcClientSpan(deadline);
      // The headers bound is no gRPC deadline: it must not reach the server as grpc-timeout.
      if (deadline.untilHeaders)
        return boundUntilMetadata(
          original.call(this, interceptorArgs, methodDefinition, options, channel),
          deadline.at,
          deadline.monotonicAt,
        );
      return original.call(this, interceptorArgs, methodDefinition, { ...options, deadline: grpcDeadline(deadline) }, channel);
    };
  }

  // Handlers are wrapped as the service is added, before grpc-js stores them: OpenTelemetry's own
  // server wrapper (which starts from a fresh context, and replaces other wrappers of `register`)
  // stays outside, and the deadline reaches the handler.
  private addService(original: AddService): AddService {
    // Read as each service is added, so a later setConfig applies to services added after it.
    const inboundOf = (): InboundDeadlines => new InboundDeadlines(this.getConfig());
    return function addService(service, implementation) {
      if (typeof implementation !== 'object' || implementation === null) {
        original.call(this, service, implementation);
        return;
      }
      const inbound = inboundOf();
      // The app's implementation stays untouched (it may be a class instance): wrapped copies on top.
      const withDeadlines = Object.create(implementation) as Record<string, unknown>;
      for (const [name, attributes] of Object.entries(service)) {
        for (const key of [name, attributes?.originalName]) {
          const handler = key === undefined ? undefined : (implementation as Record<string, unknown>)[key];
          if (key === undefined || typeof handler !== 'function') continue;
          // grpc-js binds handlers to the object it is given: the app's own object must stay `this`
          // (its #private fields, the state it writes).
          withDeadlines[key] = function (call: ServerCall, callback?: unknown): unknown {
            return runWithInboundDeadline(
              call.getDeadline?.(),
              inbound,
              () => call.getPeer?.(),
              () => (handler as Handler).call(implementation, call, callback),
            );
          };
        }
      }
      original.call(this, service, withDeadlines);
    };
  }
}

/** A policy deadline set after the gRPC client span started: record it there (not on a caller's span). */
function recordOnGrpcClientSpan(deadline: CallDeadline): void {
  const span = trace.getActiveSpan() as
    (ReturnType<typeof trace.getActiveSpan> & { kind?: SpanKind; attributes?: Record<string, unknown> }) | undefined;
  if (span?.kind === SpanKind.CLIENT && span.attributes?.['rpc.system'] === 'grpc') recordDeadline(span, deadline, true);
}

const requireHere = createRequire(import.meta.url);
const policies = new WeakMap<object, DeadlinePolicy>();
const patchedInterceptors = new Set<InterceptorsModule>();

/** The exports of `relative` next to the loaded CommonJS module whose exports are `moduleExports`. */
function internalFile(moduleExports: object, relative: string): unknown {
  const loaded = Object.values(requireHere.cache).find((module) => module?.exports === moduleExports);
  if (loaded === undefined) return undefined;
  try {
    return createRequire(loaded.filename)(relative);
  } catch {
    return undefined; // another layout of grpc-js: the file hook above still covers a later load
  }
}
