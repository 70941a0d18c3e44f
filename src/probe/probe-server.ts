import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { DEFAULT_PROBE_PORT, inKubernetes } from '../config/index.js';
import { invalidOption, MAX_TIMER_MS, numberOption } from '../errors/index.js';
import type { DiagnosticSnapshot, InFlightNode } from '../diagnostics/index.js';
import type { HealthStatus, ProbeKind } from '../health/index.js';
import { loggerOrDefault, logSwallowed, type Logger } from '../log/index.js';
import { isLoopback, splitHostPort, unmapped } from '../net/index.js';
import { dialHost, MEMBER_ROUTE } from './instance.js';
import { ServiceMembers } from './members.js';

// Required, not imported: an ES import of node:http evaluates all its exports, which loads Node's
// bundled undici and sets the process's global dispatcher. Importing lifeline must change no global.
const { createServer } = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/** What a probe server reads: a {@link Health} catalog, or (in the watchdog thread) its published verdicts. */
export interface HealthView {
  status(probe: ProbeKind): HealthStatus;
  diagnose(): DiagnosticSnapshot | Promise<DiagnosticSnapshot>;
}

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
  ['/live', 'live'],
  ['/ready', 'ready'],
  ['/startup', 'startup'],
]);

const DEBUG_DIAGNOSTICS = '/debug/diagnostics';

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
  numberOption('port', port, { min: 0, max: 65_535, integer: true });
  if (typeof host !== 'string' || host === '') throw invalidOption('host', host, 'a non-empty host name or address');
  numberOption('requestTimeoutMs', requestTimeoutMs, { min: 0, above: true, max: MAX_TIMER_MS, unit: 'ms' });
  numberOption('failureLogIntervalMs', failureLogIntervalMs, { min: 0, above: true, unit: 'ms' });
  if (typeof debugDiagnostics !== 'boolean') throw invalidOption('debugDiagnostics', debugDiagnostics, 'a boolean');
  numberOption('maxConnections', maxConnections, { min: 1, integer: true });
  numberOption('maxConnectionsPerAddress', maxConnectionsPerAddress, { min: 1, integer: true });
  numberOption('maxOverflowConnections', maxOverflowConnections, { min: 0, integer: true });
  numberOption('maxRequestsPerConnection', maxRequestsPerConnection, { min: 1, integer: true });
  numberOption('maxUnsentBytes', maxUnsentBytes, { min: 1, integer: true });
  numberOption('maxRequestsPerSecond', maxRequestsPerSecond, { min: 0, above: true });
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

/** A client on this machine, by its address and by the name it asked for (not a page rebinding its DNS name to loopback). */
function fromThisMachine(req: IncomingMessage): boolean {
  return isLoopback(req.socket.remoteAddress) && isLoopbackHost(req.headers.host);
}

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

/**
 * The dump names hosts, ports and code locations: only a client on this machine may read it, and
 * only by a loopback name. A page that rebinds its own DNS name to 127.0.0.1 reaches this port
 * from a browser on this machine, but its requests carry its own name in `Host`.
 * A body (which reads `process.report`) is reused for a second, so polling cannot stall the loop.
 */
function answerDiagnostics(health: HealthView, req: IncomingMessage, res: ServerResponse, logger: Logger): void {
  if (!readOnly(req, res)) return;
  if (!isLoopbackHost(req.headers.host)) {
    send(req, res, 403, { error: 'forbidden host' });
    return;
  }
  const now = Date.now();
  const cached = snapshots.get(health);
  if (cached !== undefined && now - cached.at < 1_000) {
    send(req, res, 200, cached.body);
    return;
  }
  // From the watchdog thread the snapshot comes from the main thread, which may be blocked.
  Promise.resolve()
    .then(() => health.diagnose())
    .then(
      (snapshot) => {
        const body = diagnosticsBody(snapshot);
        snapshots.set(health, { at: now, body });
        send(req, res, 200, body);
      },
      (err: unknown) => {
        // A blocked loop is the watchdog's to report; any other failure is a bug worth a line.
        if (!(err instanceof EventLoopBlockedError)) logSwallowed(logger, 'building /debug/diagnostics', err);
        send(req, res, err instanceof EventLoopBlockedError ? 503 : 500, {
          error: err instanceof EventLoopBlockedError ? err.message : 'diagnostics failed',
        });
      },
    )
    .catch((err: unknown) => {
      logSwallowed(logger, 'answering /debug/diagnostics', err);
      res.destroy(); // the answer itself failed: never an unhandled rejection in the app's process
    });
}

/** Thrown by a {@link HealthView} whose main thread does not answer: its event loop is blocked. */
export class EventLoopBlockedError extends Error {
  constructor(blockedMs: number) {
    super(`event loop blocked for ${(blockedMs / 1_000).toFixed(1)} s: no diagnostics until it runs again`);
    this.name = 'EventLoopBlockedError';
  }
}

const snapshots = new WeakMap<HealthView, { at: number; body: Buffer }>();

/** Largest `/debug/diagnostics` body: what a person or a script reads at once, and serializes in a few ms. */
export const MAX_DIAGNOSTICS_BYTES = 256 * 1024;

/**
 * The snapshot as JSON within {@link MAX_DIAGNOSTICS_BYTES}. Past it, parts are cut in this order
 * until it fits, and `cut` names them: creation stacks (each node keeps its `origin`), in-flight
 * trees (counted in each component's `omitted`), the handle list (the counts per type stay).
 */
export function diagnosticsBody(snapshot: DiagnosticSnapshot, maxBytes = MAX_DIAGNOSTICS_BYTES): Buffer {
  const cut: string[] = [];
  let current: DiagnosticSnapshot = snapshot;
  const steps: [string, (s: DiagnosticSnapshot) => DiagnosticSnapshot][] = [
    ['stacks', (s) => ({ ...s, components: s.components.map((c) => ({ ...c, inFlight: c.inFlight.map(withoutStack) })) })],
    [
      'inFlight',
      (s) => ({ ...s, components: s.components.map((c) => ({ ...c, inFlight: [], omitted: c.omitted + countNodes(c.inFlight) })) }),
    ],
    ['handles', (s) => ({ ...s, process: { ...s.process, handles: [] } })],
  ];
  let body = Buffer.from(JSON.stringify(current));
  for (const [name, step] of steps) {
    if (body.byteLength <= maxBytes) break;
    current = step(current);
    cut.push(name);
    body = Buffer.from(JSON.stringify({ ...current, cut }));
  }
  return body;
}

function withoutStack(node: InFlightNode): InFlightNode {
  return { ...node, stack: undefined, children: node.children.map(withoutStack) };
}

function countNodes(nodes: readonly InFlightNode[]): number {
  return nodes.reduce((n, node) => n + 1 + countNodes(node.children), 0);
}

/** The names a client on this machine uses: not any loopback address, only the ones people type. */
const LOOPBACK_NAMES: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '::1']);

/** `localhost`, `127.0.0.1` or `[::1]`, with or without a port: the names a client on this machine uses. */
export function isLoopbackHost(host: string | undefined): boolean {
  const name = host === undefined ? undefined : splitHostPort(host)?.host;
  return name !== undefined && LOOPBACK_NAMES.has(name.toLowerCase());
}

/** Only GET and HEAD are served; anything else gets 405 here. Returns whether to go on. */
function readOnly(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method === 'GET' || req.method === 'HEAD') return true;
  res.setHeader('allow', 'GET, HEAD');
  send(req, res, 405, { error: 'method not allowed' });
  return false;
}

function send(req: IncomingMessage, res: ServerResponse, code: number, body: object | Buffer): void {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  ClientLimits.unsent(req, res, req.method === 'HEAD' ? 0 : bytes.byteLength);
  res.writeHead(code, { 'content-type': 'application/json', 'cache-control': 'no-store', 'content-length': bytes.byteLength });
  res.end(req.method === 'HEAD' ? undefined : bytes);
}

/**
 * How long a connection that has sent nothing keeps its slot against a newcomer. A prober sends its
 * request as soon as it is connected, so longer than that takes on a loaded machine (a CPU-throttled
 * pod gets the CPU back within one 100 ms CFS period; twice that and a margin), and shorter than the
 * kubelet's 1 s timeout, past which a probe still silent has failed anyway. It also bounds churn: a
 * slot changes hands at most once per this time, whatever the rate of newcomers.
 */
const SILENT_GRACE_MS = 300;

/** The connections of one client address (an IPv6 peer's /64). */
interface AddressSlots {
  open: number;
  /** Those that have sent nothing yet, by when they were accepted (a Map iterates in insertion order). */
  silent: Map<Socket, number>;
}

/** Where a new connection went: a slot, the overflow, or (closed at accept) nowhere. */
type Held = 'slot' | 'overflow' | undefined;

/**
 * Who holds the connection slots. A kubelet opens a fresh connection per probe and sends its
 * request at once; a slow client holds its slot until a timeout. One address holds at most its
 * share of the slots (as nginx's `limit_conn`): the kubelet, from the node's address, keeps its own
 * whatever other addresses do. Past a cap, a newcomer takes the slot of the connection that has
 * sent nothing for longest, once that is older than {@link SILENT_GRACE_MS}; one that has sent part
 * of a request, or is idle between requests, is left to `requestTimeoutMs` and the keep-alive
 * timeout. When no slot can be taken the newcomer is not closed but overflows: it is read like any
 * (a probe among thousands of silent clients is answered, then closed); see {@link Overflow}.
 * Closing newcomers, or the longest-waiting connection, at once is what failed probes: clients that
 * reconnect when cut then did so 8,000 to 33,000 times a second, the listen queue overflowed and
 * the kernel dropped probes' SYNs (a retransmit comes after 1 s, the kubelet's timeout). Held
 * instead, a silent client costs ~3 KB of heap and no CPU, as it does a plain node:http server.
 */
class ConnectionSlots {
  readonly #max: number;
  readonly #maxPerAddress: number;
  /** Connections holding a slot, and their address. */
  readonly #open = new Map<Socket, string>();
  /** Those of them that have sent nothing yet, oldest first. */
  readonly #silent = new Map<Socket, number>();
  readonly #addresses = new Map<string, AddressSlots>();
  readonly #overflow: Overflow;

  constructor(max: number, maxPerAddress: number, maxOverflow: number) {
    this.#max = max;
    this.#maxPerAddress = maxPerAddress;
    this.#overflow = new Overflow(maxOverflow);
  }

  accept(socket: Socket): Held {
    const now = performance.now();
    const address = addressKey(socket.remoteAddress);
    let own = this.#addresses.get(address);
    // Past its address's share, room is made among that address's connections; past the cap, among all.
    let full: Map<Socket, number> | undefined;
    if (own !== undefined && own.open >= this.#maxPerAddress) full = own.silent;
    else if (this.#open.size >= this.#max) full = this.#silent;
    if (full !== undefined) {
      const evicted = oldestSilent(full, now, (spoke) => {
        this.#spoke(spoke);
      });
      if (evicted === undefined) return this.#overflow.accept(socket, address, now) ? 'overflow' : undefined;
      this.#forget(evicted);
      evicted.destroy();
      own = this.#addresses.get(address);
    }
    if (own === undefined) {
      own = { open: 0, silent: new Map() };
      this.#addresses.set(address, own);
    }
    own.open++;
    own.silent.set(socket, now);
    this.#silent.set(socket, now);
    this.#open.set(socket, address);
    socket.once('close', () => {
      this.#forget(socket);
    });
    return 'slot';
  }

  /** A slot holder has sent something: its slot is no longer for a newcomer to take. */
  #spoke(socket: Socket): void {
    this.#silent.delete(socket);
    const address = this.#open.get(socket);
    if (address !== undefined) this.#addresses.get(address)?.silent.delete(socket);
  }

  #forget(socket: Socket): void {
    const address = this.#open.get(socket);
    if (address === undefined) return;
    this.#open.delete(socket);
    this.#silent.delete(socket);
    const own = this.#addresses.get(address);
    if (own === undefined) return;
    own.silent.delete(socket);
    if (--own.open === 0) this.#addresses.delete(address);
  }
}

/** One address's overflowing connections, oldest first. */
interface AddressOverflow {
  all: Set<Socket>;
  /** Those that have sent nothing yet, by when they were accepted. */
  silent: Map<Socket, number>;
}

/**
 * Connections past the caps: read, answered once, never kept alive ({@link ClientLimits} lets each
 * send one small request). When full, a newcomer takes the place of one that has sent nothing for
 * {@link SILENT_GRACE_MS} (none of those is a probe); failing that, of the address holding the most
 * (grace ignored): of another address if its own holds fewer, the oldest silent one else the
 * oldest, or of its own, the oldest silent one. So an address holding none is never turned away,
 * and one opening thousands of connections a second (or a mesh through which every client is
 * 127.0.0.1) churns only its own while a kubelet's fresh connection, read as soon as it comes, is
 * answered as plain node:http would answer it. Only a newcomer whose address holds the most and
 * whose own are all talking is closed at accept.
 */
class Overflow {
  readonly #max: number;
  /** Every overflowing connection, and its address. */
  readonly #address = new Map<Socket, string>();
  /** Those that have sent nothing yet, oldest first. */
  readonly #silent = new Map<Socket, number>();
  readonly #byAddress = new Map<string, AddressOverflow>();
  /** Addresses by how many they hold (index), to find the one holding the most at once. */
  readonly #holding: Set<string>[] = [];
  #most = 0;

  constructor(max: number) {
    this.#max = max;
  }

  /** Holds `socket` (from `address`), making room if full; false when it was closed instead. */
  accept(socket: Socket, address: string, now: number): boolean {
    if (this.#address.size >= this.#max) {
      const evicted = oldestSilent(this.#silent, now, (spoke) => this.#silent.delete(spoke)) ?? this.#heaviestGiving(address);
      if (evicted === undefined) {
        socket.destroy();
        return false;
      }
      this.#forget(evicted);
      evicted.destroy();
    }
    let own = this.#byAddress.get(address);
    if (own === undefined) {
      own = { all: new Set(), silent: new Map() };
      this.#byAddress.set(address, own);
    }
    this.#recount(address, own.all.size, own.all.size + 1);
    own.all.add(socket);
    own.silent.set(socket, now);
    this.#address.set(socket, address);
    this.#silent.set(socket, now);
    socket.once('close', () => {
      this.#forget(socket);
    });
    return true;
  }

  /** The connection to give way to a newcomer of `address` when none is silent past the grace. */
  #heaviestGiving(address: string): Socket | undefined {
    const mine = this.#byAddress.get(address)?.all.size ?? 0;
    const own = mine >= this.#most;
    const from = own ? address : this.#holding[this.#most]?.values().next().value;
    const entries = from === undefined ? undefined : this.#byAddress.get(from);
    if (entries === undefined) return undefined;
    for (const socket of entries.silent.keys()) {
      if (socket.bytesRead === 0) return socket;
      entries.silent.delete(socket); // bytes sent are never unsent
    }
    return own ? undefined : entries.all.values().next().value;
  }

  #forget(socket: Socket): void {
    const address = this.#address.get(socket);
    if (address === undefined) return;
    this.#address.delete(socket);
    this.#silent.delete(socket);
    const own = this.#byAddress.get(address);
    if (own === undefined) return;
    own.silent.delete(socket);
    own.all.delete(socket);
    this.#recount(address, own.all.size + 1, own.all.size);
    if (own.all.size === 0) this.#byAddress.delete(address);
  }

  /** `address` went from holding `from` to `to` (one more or one fewer). */
  #recount(address: string, from: number, to: number): void {
    if (from > 0) this.#holding[from]?.delete(address);
    if (to > 0) (this.#holding[to] ??= new Set()).add(address);
    if (to > this.#most) this.#most = to;
    while (this.#most > 0 && (this.#holding[this.#most]?.size ?? 0) === 0) this.#most--;
  }
}

/** Most overflowing connections by default, whatever the process may open. */
const MAX_DEFAULT_OVERFLOW = 4_096;

let openFilesLimit: number | undefined;

/**
 * A quarter of the files this process may open, at most {@link MAX_DEFAULT_OVERFLOW}: descriptors
 * held past the limit make the app's own accepts, calls and file opens fail with EMFILE (ECS long
 * had a hard limit of 4,096). Node raises the soft limit to the hard one at start-up, so the soft
 * limit read from `/proc/self/limits` (once: `process.report` would walk every handle) is the one
 * in force. Where it cannot be read (not Linux), 1,024 is assumed, a common small limit.
 */
function defaultMaxOverflow(): number {
  openFilesLimit ??= softOpenFiles() ?? 1_024;
  return Math.min(MAX_DEFAULT_OVERFLOW, Math.floor(openFilesLimit / 4));
}

function softOpenFiles(): number | undefined {
  let limits: string;
  try {
    limits = readFileSync('/proc/self/limits', 'latin1');
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
  if (soft === 'unlimited') return Infinity;
  const files = Number(soft);
  return Number.isSafeInteger(files) && files > 0 ? files : undefined;
}

/**
 * The oldest connection of `candidates` (accept times, oldest first) that has sent nothing, if it is
 * older than {@link SILENT_GRACE_MS}. Those found to have sent something are handed to `spoke`,
 * which removes them: bytes sent are never unsent, so each is looked at once.
 */
function oldestSilent(candidates: Map<Socket, number>, now: number, spoke: (socket: Socket) => void): Socket | undefined {
  for (const [socket, accepted] of candidates) {
    if (socket.bytesRead === 0) return now - accepted >= SILENT_GRACE_MS ? socket : undefined;
    spoke(socket);
  }
  return undefined;
}

/**
 * The address a per-address share is counted for: an IPv4 address (IPv4-mapped IPv6 as IPv4), or
 * an IPv6 peer's /64, the block one host is usually given, so that a host cannot take every slot by
 * cycling the addresses of its own /64.
 */
function addressKey(address: string | undefined): string {
  if (address === undefined) return '';
  const v4 = unmapped(address);
  if (!v4.includes(':')) return v4;
  const bare = address.split('%')[0] ?? '';
  const halves = bare.split('::');
  const groups = (half: string | undefined) =>
    half === undefined || half === '' ? [] : half.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g]));
  const head = groups(halves[0]);
  const tail = groups(halves[1]);
  const all = halves.length > 1 ? [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail] : head;
  return `${all
    .slice(0, 4)
    .map((g) => (Number.parseInt(g, 16) || 0).toString(16))
    .join(':')}::/64`;
}

/** Bytes of a response head, counted with its body as unsent until Node hands both to the kernel. */
const HEAD_BYTES = 160;

/**
 * What an overflowing connection may send: one probe request. A kubelet's is ~150 bytes; the rest is
 * room for headers a mesh adds. Held at most this (not 8 KiB of trickled headers and 64 KiB of
 * queued answers) per overflowing connection, thousands of them fit the watchdog thread's heap.
 */
const OVERFLOW_REQUEST_BYTES = 4_096;

interface Client {
  /** Requests it may send: `maxRequestsPerConnection`, or 1 when it overflows. */
  maxRequests: number;
  /** Bytes it may send (an overflowing connection's one request), and those it sent. */
  maxBytes: number;
  read: number;
  requests: number;
  /** Requests seen in what it sent, before Node parses them (ends of a request head counted). */
  sent: number;
  /** Bytes of answers not yet handed to the socket (pipelined answers wait in Node's queue). */
  unsent: number;
}

/**
 * What one client may hold. A prober sends one request per connection and reads its answer; a
 * client that pipelines thousands of requests and never reads would otherwise make Node queue an
 * answer per request (hundreds of MB over a few connections) while the probes of the kubelet wait.
 * Such a client is cut off (socket destroyed, its queue dropped) rather than answered more slowly.
 */
class ClientLimits {
  static readonly #clients = new WeakMap<Socket, Client>();
  readonly #maxRequests: number;
  readonly #maxUnsent: number;
  readonly #budget: RequestBudget;

  constructor(maxRequests: number, maxUnsent: number, budget: RequestBudget) {
    this.#maxRequests = maxRequests;
    this.#maxUnsent = maxUnsent;
    this.#budget = budget;
  }

  /**
   * Counts what `socket` sends before Node parses it. Node parses a whole read (up to 64 KiB) at
   * once, even after the request that breaks a limit has the socket destroyed: 60 reads of
   * pipelined `GET`s (~1,800 each) cost the process 2 s of CPU that probes waited behind, more on a
   * loaded machine. A read that holds more requests than the client may still send is therefore
   * dropped unparsed and the client cut off; a probe sends one request, so it never comes near.
   */
  accept(socket: Socket, overflowing: boolean): void {
    const client: Client = {
      maxRequests: overflowing ? 1 : this.#maxRequests,
      maxBytes: overflowing ? OVERFLOW_REQUEST_BYTES : Infinity,
      read: 0,
      requests: 0,
      sent: 0,
      unsent: 0,
    };
    ClientLimits.#clients.set(socket, client);
    // A 'data' listener makes Node feed its parser from the socket's reads in JavaScript, after
    // listeners put before its own.
    socket.prependListener('data', (chunk: Buffer) => {
      client.read += chunk.length;
      client.sent = requestEnds(chunk, client.sent, client.maxRequests);
      if (client.sent > client.maxRequests || client.read > client.maxBytes) unparsed(socket);
    });
  }

  /** Whether to answer `req`; false once its client is cut off. */
  admit(req: IncomingMessage, res: ServerResponse): boolean {
    const socket = req.socket;
    // Node goes on parsing the rest of a chunk of pipelined requests after the socket is destroyed.
    if (socket.destroyed) return false;
    const client = ClientLimits.#clients.get(socket);
    if (client === undefined) return false; // every connection is accepted first
    client.requests++;
    // Kernel-accepted bytes are the client's to read; what is still in Node (the socket's buffer and
    // queued pipelined answers) is memory this process holds for it.
    if (client.requests > client.maxRequests || client.unsent + socket.writableLength > this.#maxUnsent) {
      socket.destroy();
      return false;
    }
    // The last one tells a well-behaved client to reconnect; Node closes the socket after it.
    // An overflowing connection's one request is its last.
    if (client.requests === client.maxRequests) res.shouldKeepAlive = false;
    this.#budget.take(socket);
    return true;
  }

  /** Counts `bodyBytes` (and a head) as unsent until `res` is handed to the socket. */
  static unsent(req: IncomingMessage, res: ServerResponse, bodyBytes: number): void {
    // An answer the socket is free for is written to it at once, where `writableLength` counts it;
    // only one queued behind another (pipelining) waits in Node's memory. Probes never pipeline, so
    // they skip the two listeners below.
    if ((req.socket as Socket & { _httpMessage?: unknown })._httpMessage === res) return;
    const client = ClientLimits.#clients.get(req.socket);
    if (client === undefined) return;
    const bytes = HEAD_BYTES + bodyBytes;
    client.unsent += bytes;
    let counted = true;
    const done = () => {
      if (counted) client.unsent -= bytes;
      counted = false;
    };
    res.once('finish', done);
    res.once('close', done);
  }
}

const REQUEST_END = Buffer.from('\r\n\r\n');

/**
 * `counted` plus the ends of request heads (a blank line) in `chunk`, counting no further than one
 * past `max`: each read is scanned once, so the cost is at most linear in what the client sends. One
 * split across two reads is not counted; the limit after parsing still holds for it.
 */
function requestEnds(chunk: Buffer, counted: number, max: number): number {
  let at = chunk.indexOf(REQUEST_END);
  while (at !== -1 && counted <= max) {
    counted++;
    at = chunk.indexOf(REQUEST_END, at + REQUEST_END.length);
  }
  return counted;
}

/**
 * Cuts `socket` off before Node's parser reads what it just received: a paused parser leaves the
 * read unparsed (Node then reports it as a client error, which `refuse` finds already closed).
 */
function unparsed(socket: Socket): void {
  (socket as Socket & { parser?: { pause?: () => void } | null }).parser?.pause?.();
  socket.destroy();
}

/**
 * The probe server's share of the event loop, which it shares with the app: a token bucket of
 * requests per second for the whole server (a burst of a tenth of a second's worth). A request read
 * past the budget is still answered (answers are cheap and a kubelet probe, one request per
 * connection, must not fail), but its connection stops being read: the kernel's TCP window then
 * slows the sender, and reading resumes, oldest connection first, as the budget refills. Refusing with 429 or
 * 503 instead would cost as much as answering and fail the probes it is meant to protect.
 */
class RequestBudget {
  readonly #perMs: number;
  readonly #capacity: number;
  #tokens: number;
  #at = performance.now();
  readonly #paused = new Set<Socket>();
  #timer: NodeJS.Timeout | undefined;

  constructor(perSecond: number) {
    this.#perMs = perSecond / 1_000;
    this.#capacity = Math.max(1, perSecond / 10);
    this.#tokens = this.#capacity;
  }

  take(socket: Socket): void {
    this.#refill();
    this.#tokens -= 1;
    if (this.#tokens >= 0) return;
    reading(socket, false); // again if Node resumed it in between
    this.#paused.add(socket);
    this.#schedule();
  }

  #refill(): void {
    const now = performance.now();
    this.#tokens = Math.min(this.#capacity, this.#tokens + (now - this.#at) * this.#perMs);
    this.#at = now;
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(this.#release, Math.max(1, Math.ceil((1 - this.#tokens) / this.#perMs)));
    this.#timer.unref();
  }

  readonly #release = (): void => {
    this.#timer = undefined;
    this.#refill();
    let tokens = this.#tokens;
    for (const socket of this.#paused) {
      if (tokens < 1) break;
      this.#paused.delete(socket);
      if (socket.destroyed) continue;
      reading(socket, true);
      tokens -= 1;
    }
    if (this.#paused.size > 0) this.#schedule();
  };
}

type ReadingHandle = { reading?: boolean; readStart?: () => number; readStop?: () => number } | null;

/**
 * Stops or restarts reading `socket` from the kernel, whatever its stream does: past the budget, the
 * kernel's TCP window then pushes back on the sender. `socket.pause()` would not hold: Node resumes
 * the stream of a socket as it answers each request. The handle's `reading` flag stays set while it
 * is stopped, since net.Socket restarts a handle it believes stopped whenever its stream is read;
 * a stream paused by Node itself (answers queued up) stops the handle again once its buffer is full.
 */
function reading(socket: Socket, on: boolean): void {
  const handle = (socket as Socket & { _handle?: ReadingHandle })._handle;
  if (handle?.readStart === undefined || handle.readStop === undefined || socket.destroyed) return;
  if (on) handle.readStart();
  else handle.readStop();
  handle.reading = true;
}

/** Malformed, oversized or too-slow requests get a bare status line and a closed socket: no detail. */
function refuse(err: NodeJS.ErrnoException, socket: Socket): void {
  if (socket.writable && (socket as Socket & { _httpMessage?: unknown })._httpMessage === undefined) {
    const status =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? '408 Request Timeout'
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? '431 Request Header Fields Too Large'
          : '400 Bad Request';
    socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
  }
  socket.destroySoon();
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

/** A connection from this host: from loopback, or to the address it came from (a server bound to the pod's own IP). */
function fromThisHost(socket: Socket): boolean {
  return isLoopback(socket.remoteAddress) || (socket.remoteAddress !== undefined && socket.remoteAddress === socket.localAddress);
}

/** `health` with the liveness of the instance's other processes that report here. */
function withMembers(health: HealthView, members: ServiceMembers): HealthView {
  return {
    status: (probe) => (probe === 'live' ? members.live(health.status(probe)) : health.status(probe)),
    diagnose: () => health.diagnose(),
  };
}

function defaultHost(): string {
  return inKubernetes() ? '0.0.0.0' : '127.0.0.1';
}

function urlHost(host: string): string {
  const dial = dialHost(host);
  return dial.includes(':') ? `[${dial}]` : dial;
}
