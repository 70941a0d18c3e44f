/**
 * lifeline's telemetry vocabulary: the names of the spans, span events, attributes and metrics it
 * records, each with the type of its value, its unit and where it appears. Every span lifeline
 * starts and every metric it reports is under the instrumentation scope {@link SCOPE_NAME}
 * (`lifeline`). Attributes are real span attributes, so a trace search by tag finds them.
 *
 * @example
 * Jaeger search (Service = yours), Tags: `lifeline.in_flight=true` lists the traces of work that was
 * stuck while it was stuck; `lifeline.deadline.exceeded=true` the calls, requests and ticks that ran
 * out of time. The same filter on spans in code:
 * ```ts
 * import { ATTR_DEADLINE_EXCEEDED, ATTR_IN_FLIGHT } from 'otel-lifeline/semconv';
 *
 * const stuck = spans.filter((span) => span.attributes[ATTR_IN_FLIGHT] === true);
 * const late = spans.filter((span) => span.attributes[ATTR_DEADLINE_EXCEEDED] === true);
 * ```
 * @packageDocumentation
 */

// ---- Scope ----

/**
 * Instrumentation scope name of every span lifeline starts, and the name of the meter its metrics
 * are reported on: `lifeline`.
 */
export const SCOPE_NAME = 'lifeline';

// ---- Span attributes: health ticks and deadlines ----

/**
 * Span attribute, string: the component's name. On tick spans (`tick <component>`) and on the
 * `<component> unhealthy` children of a verdict; also a metric attribute of
 * {@link METRIC_HEALTH_STATUS}, {@link METRIC_HEALTH_TICK_LAG} and {@link METRIC_HEALTH_VERDICTS}.
 */
export const ATTR_HEALTH_COMPONENT = 'lifeline.health.component';
/**
 * Span attribute, string: the probe the component answers to, `liveness`, `readiness` or `startup`.
 * On tick spans (`tick <component>`) and on the `<component> unhealthy` children of a verdict; also
 * a metric attribute of {@link METRIC_HEALTH_STATUS}, {@link METRIC_HEALTH_TICK_LAG},
 * {@link METRIC_HEALTH_VERDICTS} and {@link METRIC_HEALTH_COMPONENTS}.
 */
export const ATTR_HEALTH_PROBE = 'lifeline.health.probe';
/**
 * Span attribute, int: the tick's sequence number for its component (1 for the first tick it took,
 * then 2, 3, …). On tick spans (`tick <component>`) only.
 */
export const ATTR_HEALTH_TICK = 'lifeline.health.tick';
/**
 * Span attribute, string: the deadline, an ISO 8601 UTC time with milliseconds
 * (`2025-06-01T12:00:03.500Z`), not a number. On tick spans (`tick <component>`, the moment the
 * component must be back) and on every span started under a deadline; on a client span whose call
 * got its deadline from a policy rule after the span started, set when the rule applied. With
 * `lifeline.deadline.source` `headers` it is the bound on the wait for the response head only.
 */
export const ATTR_DEADLINE_AT = 'lifeline.deadline.at';
/**
 * Span attribute, int, ms: the time left until the deadline when it was recorded (at the span's
 * start; for a client call given its deadline by a policy rule, when the rule applied), rounded to
 * whole ms, never below 0. On the same spans as {@link ATTR_DEADLINE_AT}.
 */
export const ATTR_DEADLINE_BUDGET_MS = 'lifeline.deadline.budget_ms';
/**
 * Span attribute, string: where the deadline came from: `tick` (a tick's, on tick spans and the work
 * they run), `inbound` (the caller's, propagated with the request), `scope` (`withDeadline` /
 * `withTimeout`), `policy` (a policy rule or `defaultTimeoutMs`) or `headers` (only
 * `headersTimeoutMs` bounds the call, up to its response head). On the same spans as
 * {@link ATTR_DEADLINE_AT}; also a metric attribute of {@link METRIC_DEADLINE_EXCEEDED} (any other
 * value counted as `unknown`).
 */
export const ATTR_DEADLINE_SOURCE = 'lifeline.deadline.source';
/**
 * Span attribute, boolean, only ever `true`: the span ran out of time. Set when a deadline cut it
 * (then also `error.type` `timeout` and status ERROR), when it ended after its deadline without
 * being cut (it overran; then with {@link ATTR_DEADLINE_OVERDUE_MS}, status left as it was), on a
 * tick span (`tick <component>`) ended after its deadline (status ERROR), and on an in-flight
 * snapshot of work past its deadline (with {@link ATTR_IN_FLIGHT_OVERDUE_MS}). Absent otherwise.
 */
export const ATTR_DEADLINE_EXCEEDED = 'lifeline.deadline.exceeded';
/**
 * Span attribute, int, ms: on a span that ended after its deadline without being cut by it (it
 * overran), by how many ms, rounded to whole ms. Set together with {@link ATTR_DEADLINE_EXCEEDED};
 * never on tick spans, in-flight snapshots, or spans bounded only by `headersTimeoutMs`.
 */
export const ATTR_DEADLINE_OVERDUE_MS = 'lifeline.deadline.overdue_ms';
/**
 * Span attribute, boolean, on client spans: `true` on a call that started with no deadline at all
 * and on one only `headersTimeoutMs` bounds (`lifeline.deadline.source` `headers`: the rest of the
 * call has none); `false` on a client call whose deadline a policy rule gave after its span started.
 * Absent on client calls started under a deadline, and on other spans.
 */
export const ATTR_DEADLINE_MISSING = 'lifeline.deadline.missing';

// ---- Diagnostics: the verdict span, its event, and snapshots of work in flight ----

/**
 * Span attribute, string[]: the names of the unhealthy components. On verdict spans
 * (`health verdict: <components>`, root spans with status ERROR) only.
 */
export const ATTR_HEALTH_UNHEALTHY = 'lifeline.health.unhealthy';
/**
 * Span event name: the diagnostic dump, one event on each verdict span
 * (`health verdict: <components>`), with {@link ATTR_DIAGNOSTIC_OVERVIEW},
 * {@link ATTR_DIAGNOSTIC_SPAN_TREE}, {@link ATTR_DIAGNOSTIC_STACKS} and
 * {@link ATTR_DIAGNOSTIC_TRUNCATED}.
 */
export const EVENT_DIAGNOSTIC = 'lifeline.diagnostic';
/**
 * Event attribute, string (multi-line text, at most the diagnostics' `maxBytes`, 16 KiB by default):
 * a few lines a person reads first: per component, its stuck calls, where to, how late, from where.
 * On the {@link EVENT_DIAGNOSTIC} event. Also a span attribute of the summary span of stuck work the
 * caps left out (`stuck work: <n> in flight (…)`, `in flight at SIGTERM: …`): one `<count> × <route>`
 * line per route.
 * Named to sort first: Jaeger lists an event's attributes alphabetically.
 */
export const ATTR_DIAGNOSTIC_OVERVIEW = 'lifeline.diagnostic.overview';
/**
 * Event attribute, string (JSON, at most `maxBytes`): per unhealthy component, its last tick (trace
 * and span ids, seq, deadline) and the spans still in flight in its tick trace (name, age, deadline,
 * key attributes, where each started). On the {@link EVENT_DIAGNOSTIC} event.
 */
export const ATTR_DIAGNOSTIC_SPAN_TREE = 'lifeline.diagnostic.span_tree';
/**
 * Event attribute, string (multi-line text, at most `maxBytes`): the creation stacks of those spans
 * (the app's frames), the process's libuv handles, active resources and event-loop delay. On the
 * {@link EVENT_DIAGNOSTIC} event.
 */
export const ATTR_DIAGNOSTIC_STACKS = 'lifeline.diagnostic.stacks';
/**
 * Event attribute, boolean: whether the overview, the span tree or the stacks was cut at
 * `maxBytes`. On the {@link EVENT_DIAGNOSTIC} event.
 */
export const ATTR_DIAGNOSTIC_TRUNCATED = 'lifeline.diagnostic.truncated';
/**
 * Span attribute, boolean, only ever `true`: the span is a snapshot of work still in flight, not a
 * real span. On snapshot spans (`<name> <target> (in flight…)`, each of the same kind and attributes
 * as the span it stands for; exported for a verdict, by the stuck-work rounds and when the process
 * ends), on the summary span of stuck work the caps left out (`stuck work: …`, `in flight at …`)
 * and on the span of a crash (`uncaught exception: …`, `unhandled rejection: …`).
 */
export const ATTR_IN_FLIGHT = 'lifeline.in_flight';
/**
 * Span attribute, string (16 hex digits): the span ID of the real span a snapshot stands for. On
 * snapshot spans (`… (in flight…)`).
 */
export const ATTR_IN_FLIGHT_SPAN_ID = 'lifeline.in_flight.span_id';
/**
 * Span attribute, int, ms: how long the real span had been in flight when the snapshot was taken.
 * On snapshot spans (`… (in flight…)`).
 */
export const ATTR_IN_FLIGHT_AGE_MS = 'lifeline.in_flight.age_ms';
/**
 * Span attribute, int, ms: how far past its deadline a span still in flight was when the snapshot
 * was taken (a verdict, a stuck-work round, or the process ending). On snapshot spans
 * (`… (in flight, <n> s past deadline)`) of work past its deadline only, together with
 * {@link ATTR_DEADLINE_EXCEEDED} and status ERROR.
 */
export const ATTR_IN_FLIGHT_OVERDUE_MS = 'lifeline.in_flight.overdue_ms';

// ---- The event-loop watchdog: its span, the block's duration so far or in all, and how it was caught ----

/**
 * Span name, and span event name: `event loop blocked`. The watchdog thread's root span (status
 * ERROR) for a reported block of the event loop: one when the block is detected
 * (`lifeline.event_loop.ongoing` `true`), a second covering the whole block once the loop runs again
 * (`false`). When the stack was read, the span has an event of the same name whose attribute
 * `code.stacktrace` (string, redacted) holds it.
 */
export const SPAN_EVENT_LOOP_BLOCKED = 'event loop blocked';
/**
 * Span attribute, int, ms: how long the event loop has been blocked, so far (at detection) or in all
 * (once it runs again). On `event loop blocked` spans, and on the verdict span
 * (`health verdict: healthcheck`) recorded after a block that failed the probes.
 */
export const ATTR_EVENT_LOOP_BLOCKED_MS = 'lifeline.event_loop.blocked_ms';
/**
 * Span attribute, boolean: `true` on the `event loop blocked` span exported at detection (the loop
 * still blocked), `false` on the one covering the whole block.
 */
export const ATTR_EVENT_LOOP_ONGOING = 'lifeline.event_loop.ongoing';
/**
 * Span attribute, boolean: `true` when the block is outside JavaScript (a native call such as
 * `execSync` or a sync read: the inspector could not pause it in time). On `event loop blocked`
 * spans.
 */
export const ATTR_EVENT_LOOP_NATIVE = 'lifeline.event_loop.native';
/**
 * Span attribute, string: the main thread's kernel wait channel and system call number, Linux only
 * (`pipe_read (syscall 0)`, or `running`). On `event loop blocked` spans of a native block
 * ({@link ATTR_EVENT_LOOP_NATIVE} `true`), when it could be read.
 */
export const ATTR_EVENT_LOOP_WAIT = 'lifeline.event_loop.wait';
/**
 * Span attribute, boolean, only ever `true`: the block began before the app was serving (module
 * loading): it spent none of the report budget. On `event loop blocked` spans; absent otherwise.
 */
export const ATTR_EVENT_LOOP_STARTUP = 'lifeline.event_loop.startup';
/**
 * Span attribute, string: on the verdict recorded after a block (`health verdict: healthcheck`):
 * where the loop was blocked, the top frame of the app's code (`crunchReport (app.js:8)`), redacted.
 * Absent when no stack was captured.
 */
export const ATTR_EVENT_LOOP_BLOCKED_IN = 'lifeline.event_loop.blocked_in';

// ---- Metrics (OpenTelemetry metrics API, meter `lifeline`) and their attributes ----

/**
 * Metric: observable gauge, unit `1`: whether the component passed its last ping round, 1 healthy,
 * 0 unhealthy. Per component ({@link ATTR_HEALTH_COMPONENT}, {@link ATTR_HEALTH_PROBE}), for the
 * first `maxComponents` (100) of the catalog.
 */
export const METRIC_HEALTH_STATUS = 'lifeline.health.status';
/**
 * Metric: observable gauge, unit `s`: how long the component's oldest tick has waited to be taken
 * (0: none waits). Per component ({@link ATTR_HEALTH_COMPONENT}, {@link ATTR_HEALTH_PROBE}), for the
 * first `maxComponents` (100).
 */
export const METRIC_HEALTH_TICK_LAG = 'lifeline.health.tick.lag';
/**
 * Metric: observable counter, unit `{verdict}`: times the component turned unhealthy. Per component
 * ({@link ATTR_HEALTH_COMPONENT}, {@link ATTR_HEALTH_PROBE}), for the first `maxComponents` (100).
 */
export const METRIC_HEALTH_VERDICTS = 'lifeline.health.verdicts';
/**
 * Metric: observable gauge, unit `{component}`: every registered component counted by
 * {@link ATTR_HEALTH_PROBE} and {@link ATTR_HEALTH_STATE}, whatever `maxComponents` (each of the 6
 * series reported, 0 included).
 */
export const METRIC_HEALTH_COMPONENTS = 'lifeline.health.components';
/** Metric attribute, string: `healthy` or `unhealthy`, on {@link METRIC_HEALTH_COMPONENTS}. */
export const ATTR_HEALTH_STATE = 'lifeline.health.state';
/**
 * Metric: counter, unit `{call}`: calls, ticks and requests a deadline ended (spans marked
 * {@link ATTR_DEADLINE_EXCEEDED} without {@link ATTR_DEADLINE_OVERDUE_MS}), counted from every
 * recorded span, sampled or not. Attributes: `server.address` (calls with one; capped, then
 * {@link OTHER_ADDRESSES}) and {@link ATTR_DEADLINE_SOURCE}. The same name as the span attribute.
 */
export const METRIC_DEADLINE_EXCEEDED = 'lifeline.deadline.exceeded';
/**
 * Metric: counter, unit `{call}`: client calls made with no deadline at all (client spans with
 * {@link ATTR_DEADLINE_MISSING} `true`), counted from every recorded span. Attribute:
 * `server.address` (capped, then {@link OTHER_ADDRESSES}). The same name as the span attribute.
 */
export const METRIC_DEADLINE_MISSING = 'lifeline.deadline.missing';
/**
 * Metric: observable gauge, unit `s`: event-loop delay, 99th percentile since the previous
 * collection. No attributes.
 */
export const METRIC_EVENT_LOOP_DELAY_P99 = 'lifeline.event_loop.delay.p99';
/**
 * Metric: observable gauge, unit `s`: event-loop delay, the longest since the previous collection.
 * No attributes.
 */
export const METRIC_EVENT_LOOP_DELAY_MAX = 'lifeline.event_loop.delay.max';
/**
 * Metric: observable counter, unit `s`: seconds the event loop stalled because the process got no
 * CPU (stopped, throttled), as the watchdog saw it, summed over stalls of at least its threshold;
 * such a stall is not a block and gets no span. No attributes.
 */
export const METRIC_PROCESS_CPU_STARVED = 'lifeline.process.cpu_starved';
/**
 * Metric: observable gauge, unit `{span}`: spans stuck in flight (past their deadline, or with none
 * past `stuckAfterMs`) at the last stuck-work round, each heading a stuck subtree (components' tick
 * work is left to their verdicts), by {@link ATTR_IN_FLIGHT_KIND} and {@link ATTR_IN_FLIGHT_OPERATION}.
 * A series no longer stuck reports 0.
 */
export const METRIC_IN_FLIGHT_STUCK = 'lifeline.in_flight.stuck';
/**
 * Metric attribute, string: the span kind of a stuck span on {@link METRIC_IN_FLIGHT_STUCK}:
 * `internal`, `server`, `client`, `producer` or `consumer`.
 */
export const ATTR_IN_FLIGHT_KIND = 'lifeline.in_flight.kind';
/**
 * Metric attribute, string, on {@link METRIC_IN_FLIGHT_STUCK}: a server span's method and route
 * (`GET /orders/:id`); a client span's name and `server.address` (`GET payments.internal`); else the
 * span's name. At most 50 distinct operations for the life of the process, then
 * {@link OTHER_ADDRESSES}.
 */
export const ATTR_IN_FLIGHT_OPERATION = 'lifeline.in_flight.operation';
/**
 * Sentinel value `_OTHER`, string: what a capped metric attribute reads once its distinct values
 * reached their cap: `server.address` on {@link METRIC_DEADLINE_EXCEEDED} and
 * {@link METRIC_DEADLINE_MISSING} (100 per counter, `maxServerAddresses`), and
 * {@link ATTR_IN_FLIGHT_OPERATION} on {@link METRIC_IN_FLIGHT_STUCK} (50).
 */
export const OTHER_ADDRESSES = '_OTHER';
