import { SpanKind, type Span } from '@opentelemetry/api';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InFlightSpanProcessor } from '../../src/diagnostics/index.js';
import type { TrackedSpan } from '../../src/diagnostics/in-flight-span-processor.js';
import { byKindAndOperation, countStuck, routeOf, type StuckCounts } from '../../src/diagnostics/stuck-operations.js';

/** What stuck work is counted by, on real tracked spans of a real provider. */
let inFlight: InFlightSpanProcessor;
let provider: TracerProvider;
let open: Span[] = [];

beforeEach(() => {
  inFlight = new InFlightSpanProcessor({ captureStacks: 'off' });
  provider = new TracerProvider({ spanProcessors: [inFlight] });
  open = [];
});
afterEach(async () => {
  for (const span of open) span.end();
  await provider.shutdown();
});

function tracked(name: string, kind: SpanKind, attributes: Record<string, string | number> = {}): TrackedSpan {
  const span = provider.getTracer('test').startSpan(name, { kind, attributes });
  open.push(span);
  const found = inFlight.get(span.spanContext().spanId);
  if (found === undefined) throw new Error('not tracked');
  return found;
}

describe('routeOf', () => {
  it('a request by its method and route, a call by where it goes, anything else by its name', () => {
    const request = tracked('GET', SpanKind.SERVER, { 'http.request.method': 'GET', 'http.route': '/orders/:id' });
    expect(routeOf(request)).toBe('GET /orders/:id');
    expect(routeOf(tracked('handler', SpanKind.SERVER, { 'http.route': '/search' }))).toBe('/search');
    expect(routeOf(tracked('GET', SpanKind.CLIENT, { 'server.address': 'stock.internal', 'server.port': 8080 }))).toBe(
      'GET stock.internal',
    );
    expect(routeOf(tracked('GET', SpanKind.CLIENT))).toBe('GET');
    // Only a client call is told apart by its host: an internal span's is no destination.
    expect(routeOf(tracked('work', SpanKind.INTERNAL, { 'server.address': 'stock.internal' }))).toBe('work');
  });

  it('is read once per span: a stuck span keeps the operation it was first counted by', () => {
    const request = tracked('GET', SpanKind.SERVER, { 'http.request.method': 'GET', 'http.route': '/orders/:id' });
    expect(routeOf(request)).toBe('GET /orders/:id');
    request.span.setAttribute('http.route', '/other');
    expect(routeOf(request)).toBe('GET /orders/:id');
  });
});

describe('countStuck and byKindAndOperation', () => {
  it('count by kind and operation, the first 50 operations told apart and the rest _OTHER', () => {
    const counts: StuckCounts = new Map();
    const operations = new Set<string>();
    const request = () => tracked('GET', SpanKind.SERVER, { 'http.request.method': 'GET', 'http.route': '/orders/:id' });
    countStuck(counts, operations, request());
    countStuck(counts, operations, request());
    countStuck(counts, operations, tracked('GET', SpanKind.CLIENT, { 'server.address': 'stock.internal' }));
    for (let i = 0; i < 50; i++) countStuck(counts, operations, tracked(`job ${String(i)}`, SpanKind.INTERNAL));
    const result = byKindAndOperation(counts);
    expect(result.get('server\nGET /orders/:id')).toBe(2);
    expect(result.get('client\nGET stock.internal')).toBe(1);
    expect(result.get('internal\njob 47')).toBe(1);
    // 2 operations, then 48 jobs told apart: the last 2 jobs are _OTHER.
    expect(result.has('internal\njob 48')).toBe(false);
    expect(result.get('internal\n_OTHER')).toBe(2);
    expect(operations.size).toBe(50);
    // Kinds with no stuck span are not reported.
    expect([...result.keys()].filter((key) => key.startsWith('producer') || key.startsWith('consumer'))).toEqual([]);
    expect(result.size).toBe(2 + 48 + 1);
  });
});
