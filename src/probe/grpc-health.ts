import type { HealthCatalog, ProbeKind } from '../health/index.js';

/**
 * The gRPC service name each catalog probe answers under, in `grpc.health.v1.Health`: `""` (what
 * Kubernetes' gRPC probe asks when it names no service) and `"live"` are liveness, `"ready"`
 * readiness, `"startup"` the startup probe.
 */
export const GRPC_HEALTH_SERVICES: Readonly<Record<string, ProbeKind>> = {
  '': 'liveness',
  live: 'liveness',
  ready: 'readiness',
  startup: 'startup',
};

// grpc.health.v1.HealthCheckResponse.ServingStatus
const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;
const NOT_FOUND = 5; // gRPC status code
// The longest service name read: a request is a name, and a peer may send anything.
const MAX_REQUEST_BYTES = 1_024;

/** What the app's grpc-js `Server` offers that this needs (any grpc-js 1.x; no copy of it is loaded here). */
export interface GrpcServerLike {
  /** grpc-js's `Server.addService(service, implementation)`. */
  addService(service: object, implementation: object): void;
  /** grpc-js's `Server.removeService(service)`, used by the function that takes the service off again. */
  removeService?(service: object): void;
}

interface UnaryCall {
  request: Buffer;
}
interface WritableCall {
  request: Buffer;
  write(message: Buffer): boolean;
  end(): void;
  on(event: 'cancelled' | 'close' | 'error', listener: () => void): unknown;
}
type UnaryCallback = (error: { code: number; details: string } | null, response?: Buffer) => void;

const raw = (bytes: Buffer): Buffer => bytes;

/** `grpc.health.v1.Health` as grpc-js takes a service: the messages stay bytes, encoded here. */
export const GRPC_HEALTH_DEFINITION = {
  Check: {
    path: '/grpc.health.v1.Health/Check',
    requestStream: false,
    responseStream: false,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
    originalName: 'check',
  },
  Watch: {
    path: '/grpc.health.v1.Health/Watch',
    requestStream: false,
    responseStream: true,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
    originalName: 'watch',
  },
} as const;

/**
 * Answers gRPC's standard health protocol (`grpc.health.v1.Health`, `Check` and `Watch`) on a
 * grpc-js `server` from `health`'s verdicts: see `addGrpcHealthService`, which gives it the
 * process-wide catalog. Returns the function that removes it.
 */
export function serveGrpcHealth(server: GrpcServerLike, health: HealthCatalog): () => void {
  const servingStatus = (probe: ProbeKind): number => (health.status(probe).ok ? SERVING : NOT_SERVING);
  // Watch streams never end by themselves: the function that removes the service ends them, so a
  // server's graceful shutdown (which waits for open calls) is not held by a watching client.
  const watching = new Set<WritableCall>();
  server.addService(GRPC_HEALTH_DEFINITION, {
    check(call: UnaryCall, callback: UnaryCallback): void {
      const name = serviceName(call.request);
      const probe = probeOf(name);
      if (probe === undefined) {
        callback({
          code: NOT_FOUND,
          details: `unknown service ${JSON.stringify(name ?? '(unreadable)')}: ask "" (liveness), "ready" or "startup"`,
        });
        return;
      }
      callback(null, statusMessage(servingStatus(probe)));
    },
    watch(call: WritableCall): void {
      const probe = probeOf(serviceName(call.request));
      watching.add(call);
      const forget = (): void => {
        watching.delete(call);
      };
      for (const event of ['cancelled', 'close', 'error'] as const) call.on(event, forget);
      if (probe === undefined) {
        call.write(statusMessage(SERVICE_UNKNOWN)); // and the stream stays open, as the protocol says
        return;
      }
      let last = servingStatus(probe);
      call.write(statusMessage(last));
      const stop = health.onVerdictChange(() => {
        const now = servingStatus(probe);
        if (now === last) return;
        last = now;
        call.write(statusMessage(now));
      });
      for (const event of ['cancelled', 'close', 'error'] as const) call.on(event, stop);
    },
  });
  return () => {
    server.removeService?.(GRPC_HEALTH_DEFINITION);
    for (const call of [...watching]) call.end();
    watching.clear();
  };
}

/** The probe a service name asks for; own names only (a request for "constructor" is no probe). */
function probeOf(name: string | undefined): ProbeKind | undefined {
  return name !== undefined && Object.hasOwn(GRPC_HEALTH_SERVICES, name) ? GRPC_HEALTH_SERVICES[name] : undefined;
}

/** `HealthCheckResponse { ServingStatus status = 1; }` */
function statusMessage(status: number): Buffer {
  return Buffer.from([0x08, status]);
}

/**
 * `HealthCheckRequest { string service = 1; }`: the name (fields it does not know are skipped, as
 * protobuf readers do), or `undefined` if the bytes are no such message or too long for one.
 */
function serviceName(request: Buffer | undefined): string | undefined {
  if (request === undefined) return '';
  if (request.length > MAX_REQUEST_BYTES) return undefined;
  let name = '';
  let at = 0;
  const varint = (): number | undefined => {
    let value = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      const byte = request[at++];
      if (byte === undefined) return undefined;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    return undefined;
  };
  while (at < request.length) {
    const key = varint();
    if (key === undefined) return undefined;
    const wireType = key % 8;
    if (wireType === 0) {
      if (varint() === undefined) return undefined;
    } else if (wireType === 1 || wireType === 5) {
      at += wireType === 1 ? 8 : 4;
    } else if (wireType === 2) {
      const length = varint();
      if (length === undefined || at + length > request.length) return undefined;
      if (Math.floor(key / 8) === 1) name = request.toString('utf8', at, at + length);
      at += length;
    } else return undefined;
  }
  return at === request.length ? name : undefined;
}
