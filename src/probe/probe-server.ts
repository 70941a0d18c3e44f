import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { DEFAULT_PROBE_PORT, inKubernetes } from '../config/index.js';
import { SETTINGS, settingOption } from '../settings/index.js';
import { invalidOption, MAX_TIMER_MS, numberOption } from '../errors/index.js';
import type { HealthStatus, ProbeKind } from '../health/index.js';
import { loggerOrDefault, type Logger } from '../log/index.js';
import { bracketed, isLoopback } from '../net/index.js';
import { readOnly, refuse, send } from './answers.js';
import { ClientLimits } from './client-limits.js';
import { ConnectionSlots } from './connection-slots.js';
import { answerDiagnostics, DEBUG_DIAGNOSTICS } from './debug-diagnostics.js';
import type { HealthView } from './health-view.js';
import { dialHost, MEMBER_ROUTE } from './instance.js';
import { fromThisHost, fromThisMachine } from './local-clients.js';
import { ServiceMembers } from './members.js';
import { defaultMaxOverflow } from './overflow.js';
import { RequestBudget } from './request-budget.js';

// Required, not imported: an ES import of node:http evaluates all its exports, which loads Node's
// bundled undici and sets the process's global dispatcher. Importing lifeline must change no global.
const { createServer } = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/** Options of {@link startProbeServer}. */
export interface ProbeServerOptions {
  /** The catalog whose verdicts are served. */
  health: HealthView;
  /** TCP port; 0 picks a free one. Default 5555. */
  port?: number;
  /** Interface to bind. Default `0.0.0.0` inside Kubernetes (`KUBERNETES_SERVICE_HOST` set), else `127.0.0.1`. */
  host?: string;
  /** Where `healthcheck failed` goes. Default: lifeline's pino logger. */
  logger?: Logger;
  /** A client must send its whole request within this many ms. Default 5 000. */
  requestTimeoutMs?: number;
  /** At most one `healthcheck failed` line per probe per this many ms while the same components fail. Default 10 000. */
  failureLogIntervalMs?: number;
  /**
   * Serve `GET /debug/diagnostics` (the catalog's `diagnose()` as JSON, at most 256 KiB) to loopback
   * clients that name it `localhost`, `127.0.0.1` or `[::1]` in `Host`. Default false.
   */
  debugDiagnostics?: boolean;
  /**
   * Connections holding a slot at most. Past it, a new connection takes the slot of the one that has
   * sent nothing for longest, once that is 300 ms old (one that has sent part of a request, or is
   * idle between requests, is ended by `requestTimeoutMs` or the 5 s keep-alive timeout); when none
   * has, the new one overflows (see `maxOverflowConnections`). Default 64.
   */
  maxConnections?: number;
  /**
   * Connections holding a slot at most from one client address (IPv4-mapped IPv6 counted as IPv4,
   * IPv6 per /64). Past it, a new connection from that address takes the slot of that address's
   * connection that has sent nothing for longest, as past `maxConnections`. Default 16.
   */
  maxConnectionsPerAddress?: number;
  /**
   * Connections past `maxConnections` or `maxConnectionsPerAddress` that are still held and read:
   * each may send one request of at most 4 KiB, which is answered once (`connection: close`); one
   * that sends more, or pipelines, is cut off. Holding silent clients (~3 KB of heap each) rather
   * than closing them is what keeps clients that reconnect when cut from flooding the listen queue,
   * where the kernel drops probes' connections. When this is full, one that has sent nothing for
   * 300 ms gives way to a newcomer; else one of the address holding the most of them does (its
   * oldest silent one; the oldest if another address asks), so a flood from one address cannot
   * lock others out. Only a newcomer of an address whose own are all talking is closed at accept.
   * Default: a quarter of the files the process may open (Linux: its soft limit), at most 4 096,
   * so held sockets leave the app its descriptors.
   */
  maxOverflowConnections?: number;
  /** Requests served on one connection: the last is answered with `connection: close`, a client that sends more is cut off. Default 100. */
  maxRequestsPerConnection?: number;
  /** A client that sends a request while more than this many bytes of earlier answers are still unsent (it does not read) is cut off. Default 65 536. */
  maxUnsentBytes?: number;
  /** Requests read per second, for the whole server: past it, connections are paused (TCP pushes back on the sender) until the budget refills. Default 1 000. */
  maxRequestsPerSecond?: number;
  /**
   * This service instance's key (made by lifeline when it starts the probe server, and handed to
   * the processes it starts through their environment). With it, a process of the instance that
   * finds the port taken — a `node:cluster` worker, a forked helper — reports its liveness here,
   * proving itself with the key: `/live` then fails while any such process is unhealthy
   * (`db@4242`) or its event loop stops (`healthcheck@4242`). Without it, nobody can report.
   */
  instanceKey?: string;
}

/** A running probe server. */
export interface ProbeServer {
  /** The port it listens on. */
  readonly port: number;
  /** Base URL, e.g. `http://127.0.0.1:5555`. */
  readonly url: string;
  /** Stops listening and drops open connections. Idempotent. */
  close(): Promise<void>;
}

const ROUTES: ReadonlyMap<string, ProbeKind> = new Map([
  ['/live', 'liveness'],
  ['/ready', 'readiness'],
  ['/startup', 'startup'],
]);

/** The kubelet reads at most 10 KiB of a body anyway; a probe request needs far less than Node's 16 KiB default. */
const MAX_HEADER_BYTES = 8192;

/**
 * Serves the catalog's cached verdicts for Kubernetes probes: `/live`, `/ready` and
 * `/startup` answer 200 when ok and 503 when not. A probe never waits on a component or the
 * network: it reads verdicts that only ping rounds change. The listening socket is unref-ed: the
 * probe server alone never keeps a process alive.
 *
 * @example
 * ```ts
 * import { health, startProbeServer } from 'otel-lifeline';
 *
 * const probes = await startProbeServer({ health, port: 5555, host: '0.0.0.0' });
 * // livenessProbe: httpGet /live on 5555; readinessProbe: /ready
 * process.once('SIGTERM', () => void probes.close());
 * ```
 */
export async function startProbeServer(options: ProbeServerOptions): Promise<ProbeServer> {
  const {
    health,
    port = DEFAULT_PROBE_PORT,
    host = defaultHost(),
    logger = loggerOrDefault(undefined),
    requestTimeoutMs = 5_000,
    failureLogIntervalMs = 10_000,
    debugDiagnostics = false,
    maxConnections = 64,
    maxConnectionsPerAddress = 16,
    maxOverflowConnections = defaultMaxOverflow(),
    maxRequestsPerConnection = 100,
    maxUnsentBytes = 65_536,
    maxRequestsPerSecond = 1_000,
    instanceKey,
  } = options;
  settingOption(SETTINGS.probePort, port);
  if (typeof host !== 'string' || host === '') throw invalidOption('host', host, 'a non-empty host name or address');
  numberOption('requestTimeoutMs', requestTimeoutMs, { min: 0, above: true, max: MAX_TIMER_MS, unit: 'ms' });
  numberOption('failureLogIntervalMs', failureLogIntervalMs, { min: 0, above: true, unit: 'ms' });
  if (typeof debugDiagnostics !== 'boolean') throw invalidOption('debugDiagnostics', debugDiagnostics, 'a boolean');
  settingOption(SETTINGS.probeMaxConnections, maxConnections);
  settingOption(SETTINGS.probeMaxConnectionsPerAddress, maxConnectionsPerAddress);
  settingOption(SETTINGS.probeMaxOverflowConnections, maxOverflowConnections);
  numberOption('maxRequestsPerConnection', maxRequestsPerConnection, { min: 1, integer: true });
  numberOption('maxUnsentBytes', maxUnsentBytes, { min: 1, integer: true });
  settingOption(SETTINGS.probeMaxRequestsPerSecond, maxRequestsPerSecond);
  if (instanceKey !== undefined && (typeof instanceKey !== 'string' || instanceKey.length < 32))
    throw invalidOption('instanceKey', '(hidden)', 'a string of at least 32 characters');

  const logFailure = failureLog(logger, failureLogIntervalMs);
  const members = instanceKey === undefined ? undefined : new ServiceMembers(instanceKey);
  const view = members === undefined ? health : withMembers(health, members);
  const clients = new ClientLimits(maxRequestsPerConnection, maxUnsentBytes, new RequestBudget(maxRequestsPerSecond));
  const slots = new ConnectionSlots(maxConnections, maxConnectionsPerAddress, maxOverflowConnections);
  const server = createServer(
    {
      requestTimeout: requestTimeoutMs,
      headersTimeout: requestTimeoutMs,
      // Node checks request timeouts on this period (30 s by default): too coarse for slow clients.
      connectionsCheckingInterval: Math.max(10, Math.min(1_000, requestTimeoutMs / 2)),
      keepAliveTimeout: 5_000,
      maxHeaderSize: MAX_HEADER_BYTES,
    },
    (req, res) => {
      if (clients.admit(req, res)) answer(view, req, res, logFailure, debugDiagnostics ? logger : undefined, members);
    },
  );
  server.on('clientError', refuse);
  // Past a cap, a newcomer takes a silent connection's slot, or overflows (see ConnectionSlots).
  server.on('connection', (socket: Socket) => {
    const held = slots.accept(socket);
    if (held !== undefined) clients.accept(socket, held === 'overflow');
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  // Probes serve the app; they must not keep a process alive once the app itself is done.
  server.unref();
  const address = server.address();
  const boundPort = typeof address === 'object' && address !== null ? address.port : port;
  let closing: Promise<void> | undefined;
  return {
    port: boundPort,
    url: `http://${urlHost(host)}:${boundPort}`,
    close() {
      members?.close();
      closing ??= new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function answer(
  health: HealthView,
  req: IncomingMessage,
  res: ServerResponse,
  logFailure: (probe: ProbeKind, unhealthy: readonly string[]) => void,
  /** Set when `/debug/diagnostics` is served: where its failures are said. */
  debugDiagnostics: Logger | undefined,
  members: ServiceMembers | undefined,
): void {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  // Members run on this machine (in a pod: this network namespace); the route is not shown to others.
  if (path === MEMBER_ROUTE && members !== undefined && fromThisHost(req.socket)) {
    if (!readOnly(req, res)) return;
    const { code, body } = members.receive(query === -1 ? '' : url.slice(query + 1));
    send(req, res, code, body);
    return;
  }
  // Not even its existence is shown to a client that is not on this machine.
  if (path === DEBUG_DIAGNOSTICS && debugDiagnostics !== undefined && isLoopback(req.socket.remoteAddress)) {
    answerDiagnostics(health, req, res, debugDiagnostics);
    return;
  }
  const probe = ROUTES.get(path);
  if (probe === undefined) {
    send(req, res, 404, { error: 'not found' });
    return;
  }
  if (!readOnly(req, res)) return;
  const status = health.status(probe);
  // The catalog hands out the same frozen status until a verdict changes: serialize it once.
  let body = bodies.get(status);
  if (body === undefined) {
    body = probeBodies(status);
    bodies.set(status, body);
  }
  // Where the loop is blocked names code locations: as with the diagnostics dump, only for this machine.
  send(req, res, status.ok ? 200 : 503, body.local !== body.remote && fromThisMachine(req) ? body.local : body.remote);
  if (!status.ok) logFailure(probe, status.unhealthy);
}

const bodies = new WeakMap<HealthStatus, { local: Buffer; remote: Buffer }>();

/** A probe answer's body: `local` with where the event loop is blocked, `remote` with only for how long. */
function probeBodies(status: HealthStatus): { local: Buffer; remote: Buffer } {
  const verdicts = { status: status.ok ? 'pass' : 'fail', healthy: status.healthy, unhealthy: status.unhealthy };
  if (status.eventLoop === undefined) {
    const body = Buffer.from(JSON.stringify(verdicts));
    return { local: body, remote: body };
  }
  return {
    local: Buffer.from(JSON.stringify({ ...verdicts, eventLoop: status.eventLoop })),
    remote: Buffer.from(JSON.stringify({ ...verdicts, eventLoop: { blockedMs: status.eventLoop.blockedMs } })),
  };
}

/** Logs `healthcheck failed` when the failing set changes, and at most once per interval while it stays. */
function failureLog(logger: Logger, intervalMs: number): (probe: ProbeKind, unhealthy: readonly string[]) => void {
  const last = new Map<ProbeKind, { names: string; at: number }>();
  return (probe, unhealthy) => {
    const names = unhealthy.join(',');
    const now = Date.now();
    const previous = last.get(probe);
    if (previous !== undefined && previous.names === names && now - previous.at < intervalMs) return;
    last.set(probe, { names, at: now });
    logger.info({ probe, unhealthy }, 'healthcheck failed');
  };
}

/** `health` with the liveness of the instance's other processes that report here. */
function withMembers(health: HealthView, members: ServiceMembers): HealthView {
  return {
    status: (probe) => (probe === 'liveness' ? members.live(health.status(probe)) : health.status(probe)),
    diagnose: () => health.diagnose(),
  };
}

function defaultHost(): string {
  return inKubernetes() ? '0.0.0.0' : '127.0.0.1';
}

function urlHost(host: string): string {
  return bracketed(dialHost(host));
}
