import { requestRoute } from '../http/index.js';
import type { Redactor } from '../redaction/index.js';
import { ATTR_DEADLINE_AT, ATTR_DEADLINE_SOURCE } from '../semconv/index.js';
import type { InFlightSpanProcessor, TrackedSpan } from './in-flight-span-processor.js';
import { userFrames } from './stacks.js';
import type { DiagnosedComponent, DiagnosticSnapshot, InFlightNode } from './types.js';

// How the tracker's spans become the `InFlightNode` trees of a snapshot: redacted, bounded, and
// read without parsing per round. A verdict and a stuck-work round build them alike.

/**
 * Nodes per component tree, and nodes whose stack is redacted and shown (each frame is scanned
 * for secrets): attributes are capped at a few KiB anyway, so a dump stays fast at 10,000.
 */
export const MAX_TREE_NODES = 1_000;
const MAX_STACKS = 256;

/** Attributes worth showing for a stuck span: what it calls, where, and for which tick. */
const KEY_ATTRIBUTES = [
  'http.request.method',
  'url.full',
  'url.path',
  'http.route',
  'server.address',
  'server.port',
  'network.peer.address',
  'network.peer.port',
  'lifeline.health.component',
  'lifeline.health.tick',
  'lifeline.deadline.source',
  'db.system.name',
  'db.operation.name',
  'rpc.method',
];

/** What one tree may still spend: nodes, and nodes whose stack is shown. */
export interface TreeBudget {
  nodes: number;
  stacks: number;
}

/** A fresh budget for one tree. */
export function treeBudget(): TreeBudget {
  return { nodes: MAX_TREE_NODES, stacks: MAX_STACKS };
}

/** One unhealthy component as a snapshot holds it: the in-flight spans of its last tick's trace. */
export function componentSnapshot(
  component: DiagnosedComponent,
  inFlight: InFlightSpanProcessor | undefined,
  now: number,
  redactor: Redactor,
): DiagnosticSnapshot['components'][number] {
  const spans = component.tick === undefined || inFlight === undefined ? [] : inFlight.spansOf(component.tick.traceId);
  const budget = treeBudget();
  const trees = inFlightTrees(spans, now, budget, redactor);
  return {
    name: component.name,
    probe: component.probe,
    tick: component.tick,
    inFlight: trees,
    omitted: spans.length - (MAX_TREE_NODES - budget.nodes),
  };
}

/**
 * `spans` as trees, roots first: a span whose parent is not among them is a root. Each node spends
 * one of `budget.nodes` (the rest are left out) and, while any are left, one of `budget.stacks`.
 */
export function inFlightTrees(spans: readonly TrackedSpan[], now: number, budget: TreeBudget, redactor: Redactor): InFlightNode[] {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string | undefined, TrackedSpan[]>();
  for (const span of spans) {
    const parent = span.parentSpanId !== undefined && ids.has(span.parentSpanId) ? span.parentSpanId : undefined;
    const siblings = children.get(parent);
    if (siblings === undefined) children.set(parent, [span]);
    else siblings.push(span);
  }
  const build = (span: TrackedSpan): InFlightNode => {
    budget.nodes--;
    const frames = budget.stacks-- > 0 ? userFrames(span.stack).map((frame) => redactor.text(frame)) : [];
    // The attribute is the one record of a deadline a policy gave the span after it started.
    const deadlineAt = deadlineOfSpan(span);
    return {
      name: redactor.text(span.span.name),
      traceId: span.traceId,
      spanId: span.spanId,
      parentSpanId: span.parentSpanId,
      ageMs: Math.round(now - span.startMs),
      startedAt: span.startMs,
      deadline: deadlineAt === undefined ? undefined : { at: deadlineAt, remainingMs: Math.round(deadlineAt - now) },
      attributes: keyAttributes(span, redactor),
      origin: frames[0]?.replace(/^at /, ''),
      stack: frames.length === 0 ? undefined : frames.join('\n'),
      children: within(children.get(span.spanId) ?? [], budget).map(build),
    };
  };
  return within(children.get(undefined) ?? [], budget).map(build);
}

function keyAttributes(span: TrackedSpan, redactor: Redactor): Record<string, string | number | boolean> {
  const result: Record<string, string | number | boolean> = {};
  for (const key of KEY_ATTRIBUTES) {
    const value = span.span.attributes[key];
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
    const redacted = redactor.attribute(key, value);
    result[key] = redacted === undefined ? value : (redacted as string);
  }
  const route = span.request === undefined || result['http.route'] !== undefined ? undefined : requestRoute(span.request);
  if (route !== undefined) result['http.route'] = route;
  return result;
}

/** The first nodes of `spans` that the budget still allows (each `build` then spends one). */
function within(spans: TrackedSpan[], budget: { nodes: number }): TrackedSpan[] {
  return spans.length <= budget.nodes ? spans : spans.slice(0, Math.max(0, budget.nodes));
}

/** In-flight spans by parent span ID, built once per round. */
export function childrenOf(spans: readonly TrackedSpan[]): Map<string, TrackedSpan[]> {
  const children = new Map<string, TrackedSpan[]>();
  for (const span of spans) {
    if (span.parentSpanId === undefined) continue;
    const siblings = children.get(span.parentSpanId);
    if (siblings === undefined) children.set(span.parentSpanId, [span]);
    else siblings.push(span);
  }
  return children;
}

/** Every in-flight span below `spanId`, at most {@link MAX_TREE_NODES}. */
export function descendants(spanId: string, children: ReadonlyMap<string, readonly TrackedSpan[]>): TrackedSpan[] {
  const result: TrackedSpan[] = [];
  const stack = [spanId];
  while (stack.length > 0 && result.length < MAX_TREE_NODES) {
    for (const child of children.get(stack.pop() ?? '') ?? []) {
      result.push(child);
      stack.push(child.spanId);
    }
  }
  return result;
}

/**
 * The deadline `tracked` is bound by (epoch ms), or `undefined`: the one its span records
 * (`lifeline.deadline.at`, set at its start from the context, or later by a policy rule, which only
 * tightens it), not the headers bound, which bounds a response head, not the work. Read without
 * parsing a date per round: the tracker kept the context's deadline and the very text recorded for
 * it at the span's start, and a text seen before is not parsed again.
 */
export function deadlineOfSpan(tracked: TrackedSpan): number | undefined {
  const { attributes } = tracked.span;
  const recorded = attributes[ATTR_DEADLINE_AT];
  if (typeof recorded !== 'string') return undefined;
  if (recorded === tracked.deadlineText) return tracked.deadlineAt;
  const parsed = Date.parse(recorded);
  tracked.deadlineText = recorded;
  tracked.deadlineAt = attributes[ATTR_DEADLINE_SOURCE] === 'headers' || Number.isNaN(parsed) ? undefined : parsed;
  return tracked.deadlineAt;
}
