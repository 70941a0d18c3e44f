/** Instrumentation scope name of every span lifeline starts. */
export const SCOPE_NAME = 'lifeline';

/** Span attribute keys of lifeline's telemetry vocabulary. */
export const ATTR_HEALTH_COMPONENT = 'lifeline.health.component';
export const ATTR_HEALTH_PROBE = 'lifeline.health.probe';
export const ATTR_HEALTH_TICK = 'lifeline.health.tick';
export const ATTR_DEADLINE_AT = 'lifeline.deadline.at';
export const ATTR_DEADLINE_BUDGET_MS = 'lifeline.deadline.budget_ms';
export const ATTR_DEADLINE_SOURCE = 'lifeline.deadline.source';
export const ATTR_DEADLINE_EXCEEDED = 'lifeline.deadline.exceeded';
/** On a span that ended after its deadline without being cut by it (it overran): by how many ms. */
export const ATTR_DEADLINE_OVERDUE_MS = 'lifeline.deadline.overdue_ms';
export const ATTR_DEADLINE_MISSING = 'lifeline.deadline.missing';

/** Diagnostics: the verdict span's attribute, its event and the event's attributes. */
export const ATTR_HEALTH_UNHEALTHY = 'lifeline.health.unhealthy';
export const EVENT_DIAGNOSTIC = 'lifeline.diagnostic';
/**
 * A few lines a person reads first: per component, its stuck calls, where to, how late, from where.
 * Named to sort first: Jaeger lists an event's attributes alphabetically.
 */
export const ATTR_DIAGNOSTIC_OVERVIEW = 'lifeline.diagnostic.overview';
export const ATTR_DIAGNOSTIC_SPAN_TREE = 'lifeline.diagnostic.span_tree';
export const ATTR_DIAGNOSTIC_STACKS = 'lifeline.diagnostic.stacks';
export const ATTR_DIAGNOSTIC_TRUNCATED = 'lifeline.diagnostic.truncated';
/** Snapshot spans of work still in flight, and the real span each one stands for. */
export const ATTR_IN_FLIGHT = 'lifeline.in_flight';
export const ATTR_IN_FLIGHT_SPAN_ID = 'lifeline.in_flight.span_id';
export const ATTR_IN_FLIGHT_AGE_MS = 'lifeline.in_flight.age_ms';
/** How far past its deadline a span still in flight was when the verdict was taken. */
export const ATTR_IN_FLIGHT_OVERDUE_MS = 'lifeline.in_flight.overdue_ms';

/** The event-loop watchdog: its span, the block's duration so far or in all, and how it was caught. */
export const SPAN_EVENT_LOOP_BLOCKED = 'event loop blocked';
export const ATTR_EVENT_LOOP_BLOCKED_MS = 'lifeline.event_loop.blocked_ms';
export const ATTR_EVENT_LOOP_ONGOING = 'lifeline.event_loop.ongoing';
export const ATTR_EVENT_LOOP_NATIVE = 'lifeline.event_loop.native';
export const ATTR_EVENT_LOOP_WAIT = 'lifeline.event_loop.wait';
/** The block began before the app was serving (module loading): it spent none of the report budget. */
export const ATTR_EVENT_LOOP_STARTUP = 'lifeline.event_loop.startup';
/** On the verdict recorded after a block: where the loop was blocked (`crunchReport (app.js:8)`). */
export const ATTR_EVENT_LOOP_BLOCKED_IN = 'lifeline.event_loop.blocked_in';

/**
 * Metric names (OpenTelemetry metrics API, meter `lifeline`). Per-component series carry
 * `lifeline.health.component` and `lifeline.health.probe`; see the README's "Health as metrics".
 */
export const METRIC_HEALTH_STATUS = 'lifeline.health.status';
export const METRIC_HEALTH_TICK_LAG = 'lifeline.health.tick.lag';
export const METRIC_HEALTH_VERDICTS = 'lifeline.health.verdicts';
export const METRIC_HEALTH_COMPONENTS = 'lifeline.health.components';
/** `healthy` or `unhealthy`, on {@link METRIC_HEALTH_COMPONENTS}. */
export const ATTR_HEALTH_STATE = 'lifeline.health.state';
export const METRIC_DEADLINE_EXCEEDED = 'lifeline.deadline.exceeded';
export const METRIC_DEADLINE_MISSING = 'lifeline.deadline.missing';
export const METRIC_EVENT_LOOP_DELAY_P99 = 'lifeline.event_loop.delay.p99';
export const METRIC_EVENT_LOOP_DELAY_MAX = 'lifeline.event_loop.delay.max';
/** Seconds the event loop stalled because the process got no CPU (stopped, throttled), as the watchdog saw it. */
export const METRIC_PROCESS_CPU_STARVED = 'lifeline.process.cpu_starved';
/**
 * Spans stuck in flight (past their deadline, or with none past `stuckAfterMs`) at the last
 * stuck-work round, each heading a stuck subtree, by {@link ATTR_IN_FLIGHT_KIND} and
 * {@link ATTR_IN_FLIGHT_OPERATION}.
 */
export const METRIC_IN_FLIGHT_STUCK = 'lifeline.in_flight.stuck';
/** The span kind of a stuck span on {@link METRIC_IN_FLIGHT_STUCK}: `server`, `client`, `internal`, … */
export const ATTR_IN_FLIGHT_KIND = 'lifeline.in_flight.kind';
/** A server span's method and route (`GET /orders/:id`), else the span's name; at most 50 per kind, then `_OTHER`. */
export const ATTR_IN_FLIGHT_OPERATION = 'lifeline.in_flight.operation';
/** `server.address` of a deadline metric once the distinct addresses reached their cap (and any capped metric attribute). */
export const OTHER_ADDRESSES = '_OTHER';
