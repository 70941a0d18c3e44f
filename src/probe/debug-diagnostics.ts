import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DiagnosticSnapshot, InFlightNode } from '../diagnostics/index.js';
import { logSwallowed, type Logger } from '../log/index.js';
import { readOnly, send } from './answers.js';
import { EventLoopBlockedError, type HealthView } from './health-view.js';
import { isLoopbackHost } from './local-clients.js';

/** The route of the catalog's dump: served only with `debugDiagnostics`, and only to this machine. */
export const DEBUG_DIAGNOSTICS = '/debug/diagnostics';

/**
 * The dump names hosts, ports and code locations: only a client on this machine may read it, and
 * only by a loopback name. A page that rebinds its own DNS name to 127.0.0.1 reaches this port
 * from a browser on this machine, but its requests carry its own name in `Host`.
 * A body (which reads `process.report`) is reused for a second, so polling cannot stall the loop.
 */
export function answerDiagnostics(health: HealthView, req: IncomingMessage, res: ServerResponse, logger: Logger): void {
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
