import { SpanKind } from '@opentelemetry/api';
import { requestRoute } from '../http/index.js';
import { OTHER_ADDRESSES } from '../semconv/index.js';
import type { TrackedSpan } from './in-flight-span-processor.js';

// What stuck work is counted by: an operation name per span (a request's route, a call's
// destination), for the caps of the stuck-work rounds and for the `lifeline.in_flight.stuck` gauge.

/** Operations the stuck gauge tells apart, at most; the rest are `_OTHER`. */
const STUCK_SERIES = 50;
const KIND_NAMES = ['internal', 'server', 'client', 'producer', 'consumer'];

/** Stuck spans by operation, each a count per span kind (indexed as `SpanKind`). */
export type StuckCounts = Map<string, number[]>;

/** What the stuck-work caps count by: a server span's route, else the span's name. */
export function routeOf(tracked: TrackedSpan): string {
  if (tracked.route !== undefined) return tracked.route;
  const { attributes, name, kind } = tracked.span;
  const route = attributes['http.route'] ?? (tracked.request === undefined ? undefined : requestRoute(tracked.request));
  const method = attributes['http.request.method'];
  const host = attributes['server.address'];
  tracked.route =
    typeof route === 'string'
      ? typeof method === 'string'
        ? routeName(method, route)
        : route
      : kind === SpanKind.CLIENT && typeof host === 'string'
        ? routeName(name, host) // a client's GET is told apart by where it goes
        : name;
  return tracked.route;
}

/** `${first} ${second}` strings made before, by their parts (a storm's 10,000 spans share a few routes). */
const routeNames = new Map<string, Map<string, string>>();

/**
 * `${first} ${second}`, the same string for the same parts: a storm's first round counts 10,000
 * spans by route, and a string made per span is also hashed per span, by each map it meets.
 * Bounded (32 × 512); beyond it a string is made each time.
 */
function routeName(first: string, second: string): string {
  let bySecond = routeNames.get(first);
  if (bySecond === undefined) {
    if (routeNames.size >= 32) return `${first} ${second}`;
    bySecond = new Map();
    routeNames.set(first, bySecond);
  }
  let name = bySecond.get(second);
  if (name === undefined) {
    name = `${first} ${second}`;
    if (bySecond.size < 512) bySecond.set(second, name);
  }
  return name;
}

/** Counts `span` in `counts` by kind and operation: the first {@link STUCK_SERIES} operations ever seen (`operations`), the rest `_OTHER`. */
export function countStuck(counts: StuckCounts, operations: Set<string>, span: TrackedSpan): void {
  let operation = routeOf(span);
  if (!operations.has(operation)) {
    if (operations.size < STUCK_SERIES) operations.add(operation);
    else operation = OTHER_ADDRESSES;
  }
  let byKind = counts.get(operation);
  if (byKind === undefined) counts.set(operation, (byKind = KIND_NAMES.map(() => 0)));
  const kind: number = span.span.kind;
  if (kind >= KIND_NAMES.length) return; // no such kind: not counted
  byKind[kind] = (byKind[kind] ?? 0) + 1;
}

/** `counts` keyed `kind\noperation` (`server\nGET /orders/:id`), those that are not 0: what the gauge reports. */
export function byKindAndOperation(counts: ReadonlyMap<string, readonly number[]>): Map<string, number> {
  // Keyed per collection, not per span: a round only counts by operation and kind index.
  const result = new Map<string, number>();
  for (const [operation, byKind] of counts)
    byKind.forEach((n, kind) => {
      if (n > 0) result.set(`${KIND_NAMES[kind] ?? 'internal'}\n${operation}`, n);
    });
  return result;
}
