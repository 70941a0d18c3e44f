import { SpanKind } from '@opentelemetry/api';
import { isoTime } from '../semconv/index.js';
import type { DiagnosticSnapshot, InFlightNode } from './types.js';

// How a verdict reads to a person: the overview, the stacks text, the names of its spans. Pure
// functions of a snapshot; `Diagnostics` decides when and where they go.

/** Stuck calls named per component in the overview; the tree has all of them. */
const SUMMARY_CALLS = 5;
/** Components named in a verdict span's name; its attribute and children have them all. */
const NAMED_COMPONENTS = 3;

/**
 * A node as the span tree attribute has it, for a person reading it in Jaeger: times in ISO 8601,
 * no stack (see `stacks`), nor IDs its nesting and tick already say.
 */
export function withoutStacks(node: InFlightNode): Record<string, unknown> {
  const { stack: _stack, traceId: _trace, parentSpanId: _parent, children, ...rest } = node;
  const { startedAt, deadline } = node;
  return {
    ...rest, // the times below keep their places in it
    startedAt: isoTime(startedAt),
    deadline: deadline === undefined ? undefined : { at: isoTime(deadline.at), remainingMs: deadline.remainingMs },
    children: children.map(withoutStacks),
  };
}

/**
 * The `span_tree` attribute: per component its tick and its in-flight trees as JSON, as
 * {@link withoutStacks} has them.
 */
export function spanTree(snapshot: DiagnosticSnapshot): string {
  return JSON.stringify(
    snapshot.components.map(({ name, tick, inFlight, omitted }) => ({
      component: name,
      tick:
        tick === undefined ? undefined : { traceId: tick.traceId, spanId: tick.spanId, seq: tick.seq, deadline: isoTime(tick.deadline) },
      omitted,
      inFlight: inFlight.map(withoutStacks),
    })),
  );
}

export function count(nodes: readonly InFlightNode[]): number {
  return nodes.reduce((n, node) => n + 1 + count(node.children), 0);
}

export function formatStacks(snapshot: DiagnosticSnapshot): string {
  const lines: string[] = [];
  const visit = (node: InFlightNode, depth: number): void => {
    const url = node.attributes['url.full'];
    lines.push(`${'  '.repeat(depth)}${node.name}${typeof url === 'string' ? ` ${url}` : ''} (${state(node)})`);
    for (const frame of node.stack?.split('\n') ?? []) lines.push(`${'  '.repeat(depth + 1)}${frame}`);
    for (const child of node.children) visit(child, depth + 1);
  };
  for (const component of snapshot.components) {
    lines.push(`component ${component.name} (${component.probe}):`);
    for (const node of component.inFlight) visit(node, 1);
  }
  lines.push('', 'libuv handles:');
  for (const handle of snapshot.process.handles) lines.push(`  ${handle.type} ${handle.details}`);
  lines.push('', `active resources: ${JSON.stringify(snapshot.process.activeResources)}`);
  lines.push(
    `event-loop delay ms: p50 ${snapshot.process.eventLoopDelayMs.p50}, p99 ${snapshot.process.eventLoopDelayMs.p99}, max ${snapshot.process.eventLoopDelayMs.max}`,
  );
  return lines.join('\n');
}

/** `4.0 s`: durations as a person reads them. */
function seconds(ms: number): string {
  return `${(ms / 1_000).toFixed(1)} s`;
}

/** `in flight 4.0 s, 2.0 s past its deadline` (or `deadline in 1.0 s`, or no deadline). */
export function state(node: InFlightNode): string {
  const deadline =
    node.deadline === undefined
      ? ', no deadline'
      : node.deadline.remainingMs < 0
        ? `, ${seconds(-node.deadline.remainingMs)} past its deadline`
        : `, deadline in ${seconds(node.deadline.remainingMs)}`;
  return `in flight ${seconds(node.ageMs)}${deadline}`;
}

/**
 * A snapshot span's name, which a trace view shows on its row: the call, which dependency (a client
 * call's `host:port`; a server span's route, when it has one), that it is in flight and, past its
 * deadline, by how many whole seconds. No paths: they would make an operation name per resource
 * (and may hold what redaction does not know to hide); the URL is in the attributes.
 */
export function snapshotName(node: InFlightNode, kind: SpanKind, overdueMs: number | undefined, stuckMs?: number, ending?: string): string {
  const target = targetOf(node, kind);
  const where = target !== undefined && !node.name.includes(target) ? ` ${target}` : '';
  // Rounded as the overview's tenths read (1.96 s reads 2.0 s there, so 2 s here).
  const wholeSeconds = overdueMs === undefined ? 0 : Math.round(overdueMs / 1_000);
  const late =
    overdueMs !== undefined
      ? wholeSeconds === 0
        ? ', past deadline'
        : `, ${String(wholeSeconds)} s past deadline`
      : stuckMs !== undefined
        ? `, ${String(Math.round(stuckMs / 1_000))} s, no deadline`
        : '';
  return `${node.name}${where} (in flight${late}${ending === undefined ? '' : `, at ${ending}`})`;
}

/** `host:port` of a client call, the route of a server span. */
function targetOf(node: InFlightNode, kind: SpanKind): string | undefined {
  if (kind === SpanKind.SERVER) {
    const route = node.attributes['http.route'];
    return typeof route === 'string' ? route : undefined;
  }
  const host = node.attributes['server.address'];
  if (typeof host === 'string') {
    const port = node.attributes['server.port'];
    return typeof port === 'number' ? `${host}:${String(port)}` : host;
  }
  const url = node.attributes['url.full'];
  if (typeof url !== 'string') return undefined;
  try {
    return new URL(url).host;
  } catch {
    return undefined;
  }
}

/** `health verdict: poller, reporter` — what a search result row shows of a verdict. */
export function verdictName(unhealthy: readonly string[]): string {
  const named = unhealthy.slice(0, NAMED_COMPONENTS).join(', ');
  return `health verdict: ${named}${unhealthy.length > NAMED_COMPONENTS ? ` and ${String(unhealthy.length - NAMED_COMPONENTS)} more` : ''}`;
}

/**
 * What a person reads first: per unhealthy component, the calls still in flight in its tick trace,
 * innermost first (the one that is stuck), each with where it goes, how late it is and which of
 * the user's functions made it.
 */
export function summarize(snapshot: DiagnosticSnapshot): string {
  return snapshot.components.flatMap(componentSummary).join('\n');
}

export function componentSummary(component: DiagnosticSnapshot['components'][number]): string[] {
  const leaves: InFlightNode[] = [];
  const visit = (node: InFlightNode): void => {
    if (node.children.length === 0) leaves.push(node);
    node.children.forEach(visit);
  };
  component.inFlight.forEach(visit);
  const lines = [
    `${component.name} (${component.probe}) is unhealthy${leaves.length === 0 ? ': nothing in flight in its last tick (its work ended, or was never traced)' : ':'}`,
  ];
  for (const leaf of leaves.slice(0, SUMMARY_CALLS)) {
    const url = leaf.attributes['url.full'];
    lines.push(
      `  ${leaf.name}${typeof url === 'string' ? ` ${url}` : ''} (${state(leaf)})${leaf.origin === undefined ? '' : ` from ${leaf.origin}`}`,
    );
  }
  if (leaves.length > SUMMARY_CALLS) lines.push(`  … and ${String(leaves.length - SUMMARY_CALLS)} more (span_tree)`);
  return lines;
}

/** `text` cut to at most `maxBytes` of UTF-8, with a marker when cut. */
export function cap(text: string, maxBytes: number): { text: string; truncated: boolean } {
  if (Buffer.byteLength(text) <= maxBytes) return { text, truncated: false };
  const marker = '…[truncated]';
  let cut = Buffer.from(text)
    .subarray(0, maxBytes - Buffer.byteLength(marker))
    .toString('utf8');
  if (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1); // a character split in half
  return { text: `${cut}${marker}`, truncated: true };
}
