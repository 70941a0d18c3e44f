import { InstrumentationBase, InstrumentationNodeModuleDefinition, type InstrumentationConfig } from '@opentelemetry/instrumentation';
import type { HealthCatalog } from '../health/index.js';
import { wrapMethod } from '../hooks/index.js';
import { GRPC_HEALTH_DEFINITION, serveGrpcHealth, type GrpcServerLike } from '../probe/index.js';

/** Options of {@link GrpcHealthInstrumentation}: the catalog whose verdicts it serves. */
export interface GrpcHealthInstrumentationConfig extends InstrumentationConfig {
  health: HealthCatalog;
}

type AddService = (this: GrpcServerLike, service: Record<string, { path?: string } | undefined>, implementation: object) => void;
type BindAsync = (this: GrpcServerLike, ...args: unknown[]) => unknown;
interface GrpcModule {
  Server: { prototype: { addService: AddService; bindAsync: BindAsync; tryShutdown: BindAsync; forceShutdown: BindAsync } };
}

const HEALTH_PATHS: ReadonlySet<string> = new Set<string>(Object.values(GRPC_HEALTH_DEFINITION).map((method) => method.path));
// Per server: how to take lifeline's health service off again, once it was added.
const served = new WeakMap<object, () => void>();
// Servers where the app added a health service of its own: lifeline stays out of them.
const ownHealth = new WeakSet<object>();
let adding = false;
const KIND = 'lifeline-grpc-health';
// Per grpc-js copy patched: how to put its methods back.
const undos = new WeakMap<object, ((() => void) | undefined)[]>();

/**
 * Adds `grpc.health.v1.Health` (see `addGrpcHealthService`) to every grpc-js server the app binds
 * (`bindAsync`), so Kubernetes' gRPC probes answer from the catalog with nothing to change in the
 * app. A server where the app adds a health service of its own keeps the app's: lifeline's is not
 * added, or is taken off again if it was.
 */
// No private members: the base class patches already-loaded modules from inside its constructor.
export class GrpcHealthInstrumentation extends InstrumentationBase<GrpcHealthInstrumentationConfig> {
  constructor(config: GrpcHealthInstrumentationConfig) {
    super('lifeline-grpc-health', '0.1.0', config);
  }

  protected init(): InstrumentationNodeModuleDefinition {
    const healthOf = (): HealthCatalog => this.getConfig().health;
    return new InstrumentationNodeModuleDefinition(
      '@grpc/grpc-js',
      ['^1.0.0'],
      (exports: GrpcModule) => {
        // lifeline's wrapMethod, not the base class's _wrap: that one unwraps whatever wraps the
        // method already (lifeline's gRPC deadlines wrap addService too) before wrapping it.
        const prototype = exports.Server.prototype;
        const undo = [
          wrapMethod(
            prototype,
            'bindAsync',
            KIND,
            (original: BindAsync) =>
              function bindAsync(this: GrpcServerLike, ...args: unknown[]): unknown {
                if (!served.has(this) && !ownHealth.has(this)) {
                  adding = true;
                  try {
                    served.set(this, serveGrpcHealth(this, healthOf()));
                  } catch {
                    // an older grpc-js that refuses it: the server runs as the app made it
                  } finally {
                    adding = false;
                  }
                }
                return original.apply(this, args);
              },
          ),
          wrapMethod(
            prototype,
            'addService',
            KIND,
            (original: AddService) =>
              function addService(this: GrpcServerLike, service, implementation): void {
                if (!adding && Object.values(service).some((method) => HEALTH_PATHS.has(method?.path ?? ''))) {
                  ownHealth.add(this);
                  served.get(this)?.();
                  served.delete(this);
                }
                original.call(this, service, implementation);
              },
          ),
        ];
        // A graceful shutdown waits for open calls: the health service's Watch streams end first.
        for (const method of ['tryShutdown', 'forceShutdown'] as const)
          undo.push(
            wrapMethod(
              prototype,
              method,
              KIND,
              (original: BindAsync) =>
                function shutdown(this: GrpcServerLike, ...args: unknown[]): unknown {
                  served.get(this)?.();
                  served.delete(this);
                  return original.apply(this, args);
                },
            ),
          );
        undos.set(exports, undo);
        return exports;
      },
      (exports: GrpcModule) => {
        for (const restore of undos.get(exports) ?? []) restore?.();
        undos.delete(exports);
        return exports;
      },
    );
  }
}
