import { context, trace, type Span } from '@opentelemetry/api';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InFlightSpanProcessor } from '../../src/diagnostics/index.js';
import type { TrackedSpan } from '../../src/diagnostics/in-flight-span-processor.js';
import { childrenOf, componentSnapshot, deadlineOfSpan, descendants, inFlightTrees } from '../../src/diagnostics/snapshot-tree.js';
import { Redactor } from '../../src/redaction/index.js';

/** How the tracker's spans become a snapshot's trees, on real tracked spans of a real provider. */
let inFlight: InFlightSpanProcessor;
let provider: TracerProvider;
let open: Span[] = [];
const redactor = new Redactor();

beforeEach(() => {
  inFlight = new InFlightSpanProcessor({ captureStacks: 'all' });
  provider = new TracerProvider({ spanProcessors: [inFlight] });
  open = [];
});
afterEach(async () => {
  for (const span of open) span.end();
  await provider.shutdown();
});

function start(name: string, parent?: Span, attributes: Record<string, string | number> = {}): Span {
  const span = provider
    .getTracer('test')
    .startSpan(name, { attributes }, parent === undefined ? undefined : trace.setSpan(context.active(), parent));
  open.push(span);
  return span;
}

function tracked(span: Span): TrackedSpan {
  const found = inFlight.get(span.spanContext().spanId);
  if (found === undefined) throw new Error('not tracked');
  return found;
}

describe('inFlightTrees', () => {
  it('nests children under their parents; a span whose parent is not among them is a root', () => {
    const request = start('GET /orders');
    const call = start('GET', request);
    const query = start('SELECT', call);
    const trees = inFlightTrees([tracked(call), tracked(query)], Date.now(), { nodes: 10, stacks: 10 }, redactor);
    expect(trees.map((n) => n.name)).toEqual(['GET']);
    expect(trees[0]?.children.map((n) => n.name)).toEqual(['SELECT']);
    expect(trees[0]?.parentSpanId).toBe(request.spanContext().spanId);
  });

  it('spends the budget: nodes past it are left out, stacks past it are not shown', () => {
    const root = start('root');
    const spans = [root, start('a', root), start('b', root)].map(tracked);
    const budget = { nodes: 2, stacks: 1 };
    const [tree] = inFlightTrees(spans, Date.now(), budget, redactor);
    expect(tree?.children.map((n) => n.name)).toEqual(['a']);
    expect(budget.nodes).toBe(0);
    expect(tree?.stack).toContain('snapshot-tree.test.ts');
    expect(tree?.children[0]?.stack).toBeUndefined();
  });

  it('redacts names and key attributes, and keeps only the key attributes', () => {
    const span = start('GET /cb?token=s3cret', undefined, { 'url.full': 'https://api.test/cb?token=s3cret', 'app.other': 'x' });
    const [node] = inFlightTrees([tracked(span)], Date.now(), { nodes: 10, stacks: 0 }, redactor);
    expect(node?.name).toBe('GET /cb?token=REDACTED');
    expect(node?.attributes).toEqual({ 'url.full': 'https://api.test/cb?token=REDACTED' });
  });
});

describe('componentSnapshot', () => {
  it("holds the tick trace's in-flight spans, the first 1,000, and counts the rest as omitted", () => {
    const tick = start('tick');
    for (let i = 0; i < 1_004; i++) start(`call ${String(i)}`, tick);
    start('elsewhere'); // another trace: not the component's
    const { traceId, spanId } = tick.spanContext();
    const component = { name: 'poller', probe: 'liveness' as const, tick: { traceId, spanId, seq: 1, deadline: Date.now() } };
    const snapshot = componentSnapshot(component, inFlight, Date.now(), redactor);
    expect(snapshot.inFlight).toHaveLength(1);
    expect(snapshot.inFlight[0]?.children).toHaveLength(999);
    expect(snapshot.omitted).toBe(5);
    expect(componentSnapshot({ ...component, tick: undefined }, inFlight, Date.now(), redactor)).toMatchObject({
      inFlight: [],
      omitted: 0,
    });
  });
});

describe('descendants', () => {
  it('every span below one, not the span itself nor its siblings', () => {
    const root = start('root');
    const child = start('child', root);
    const grandchild = start('grandchild', child);
    start('sibling of child', root);
    const all = inFlight.all();
    const below = descendants(child.spanContext().spanId, childrenOf(all)).map((s) => s.span.name);
    expect(below).toEqual(['grandchild']);
    expect(descendants(grandchild.spanContext().spanId, childrenOf(all))).toEqual([]);
    expect(
      descendants(root.spanContext().spanId, childrenOf(all))
        .map((s) => s.span.name)
        .sort(),
    ).toEqual(['child', 'grandchild', 'sibling of child']);
  });
});

describe('deadlineOfSpan', () => {
  const at = '2030-01-02T03:04:05.678Z';

  it('reads the deadline the span records, and no other', () => {
    const none = start('no deadline');
    const bound = start('bound', undefined, { 'lifeline.deadline.at': at, 'lifeline.deadline.source': 'inbound' });
    const headers = start('headers', undefined, { 'lifeline.deadline.at': at, 'lifeline.deadline.source': 'headers' });
    const garbled = start('garbled', undefined, { 'lifeline.deadline.at': 'soon' });
    expect(deadlineOfSpan(tracked(none))).toBeUndefined();
    expect(deadlineOfSpan(tracked(bound))).toBe(Date.parse(at));
    // A headers bound bounds a response head, not the work.
    expect(deadlineOfSpan(tracked(headers))).toBeUndefined();
    expect(deadlineOfSpan(tracked(garbled))).toBeUndefined();
  });

  it('parses a text once, and again when a rule changed it', () => {
    const span = start('call', undefined, { 'lifeline.deadline.at': at });
    const entry = tracked(span);
    expect(deadlineOfSpan(entry)).toBe(Date.parse(at));
    entry.deadlineAt = 42; // what it kept for that text is what it answers
    expect(deadlineOfSpan(entry)).toBe(42);
    const tighter = '2030-01-02T03:04:00.000Z';
    span.setAttribute('lifeline.deadline.at', tighter);
    expect(deadlineOfSpan(entry)).toBe(Date.parse(tighter));
  });
});
