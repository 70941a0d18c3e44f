import { invalidOption, numberOption } from '../errors/index.js';
import { SETTINGS, settingOption } from '../settings/index.js';
import { DEADLINE_HEADER, ENVOY_UPSTREAM_TIMEOUT_HEADER } from '../propagation/index.js';
import { HeaderHosts, type DeadlineHeaderHosts } from './header-hosts.js';
import { stateless } from './stateless-regexp.js';

/** Attribute values a rule can match: equal strings or numbers, or a RegExp tested against the string form. */
export type RuleValue = string | number | RegExp;

/**
 * A deadline enforced from a call's OpenTelemetry semantic-convention attributes, e.g.
 * `{ match: { 'server.address': 'kubelet.local', 'http.request.method': 'GET' }, timeoutMs: 2000 }`.
 * Matchable keys: `server.address`, `server.port`, `http.request.method`, `url.scheme`, `url.path`,
 * and for database and cache clients `db.system.name` (`postgresql`, `mysql`, `mariadb`, `redis`,
 * `mongodb`), `db.namespace` (the database), `db.operation.name` (`SELECT`, `BLPOP`, `find`), as
 * OpenTelemetry's semantic conventions name them: `{ match: { 'db.system.name': 'postgresql' }, timeoutMs: 5000 }`.
 */
export interface DeadlineRule {
  /** Attribute → value; the rule applies when every one matches the call. */
  readonly match: Readonly<Record<string, RuleValue>>;
  /** The call's budget from when it is made (only ever shrinks a deadline already in force). */
  readonly timeoutMs: number;
}

/** Options shared by every client path: the undici dispatcher and interceptor, node:http, HTTP/2, gRPC, the database drivers. */
export interface DeadlinePolicyOptions {
  /** Rules tried in order; the first whose every key matches gives the call `now + timeoutMs`. */
  policy?: readonly DeadlineRule[];
  /** Bounds calls that have no deadline at all (no context deadline, no matching rule). */
  defaultTimeoutMs?: number;
  /**
   * The bound on a call nothing else bounds (no context deadline, no matching rule, no
   * `defaultTimeoutMs`, no timeout of the caller's own: undici `headersTimeout`, node:http
   * `timeout`/`setTimeout`, axios `timeout`, a gRPC deadline): a connection within the bound
   * (queue, DNS, connect, TLS, counted from dispatch), and, once the request has been sent in full,
   * its response head within the bound. Sending the request body is not counted (as with undici's
   * own `headersTimeout`), so uploads run as long as they run; on undici, a streamed body whose end
   * undici does not report is not bounded once connected. Once the head arrives the call is no
   * longer bounded, so downloads and streams (server-sent events, big bodies, watches) run as long
   * as they run: this bound cannot break them, only end a call to an
   * upstream that never answers (without it undici waits 300 s, node:http and gRPC forever). When it
   * fires the caller gets what a deadline gives (`DeadlineExceededError`, gRPC `DEADLINE_EXCEEDED`),
   * and the client span `lifeline.deadline.source` `headers`. gRPC: unary calls only, until the
   * response metadata (a gRPC server sends it with its first message, so a quiet stream has no
   * head to wait for). An upstream that thinks longer before it answers (a non-streaming LLM API, a
   * report endpoint) needs a policy rule for it, or a bigger value. `0` (the default): no bound.
   * `startLifeline` and register mode use 60 000.
   * @example `installDeadlineDispatcher({ headersTimeoutMs: 60_000, policy: [{ match: { 'server.address': 'api.openai.com' }, timeoutMs: 600_000 }] })`
   */
  headersTimeoutMs?: number;
  /**
   * The hosts outgoing calls send their deadline to, as `x-request-timeout-ms` (the budget left of
   * the deadline the call got: the context's or a policy rule's): `'internal'` (default),
   * `'all'`, `'none'`, or a list of host names, `.suffix`es, RegExps and `'internal'`. A third
   * party has no use for it, and it tells them how long your caller is willing to wait. Sent only
   * while lifeline's `DeadlinePropagator` is the global propagator (or part of it); gRPC calls
   * carry `grpc-timeout`, gRPC's own, to every host.
   * @example `installHttpDeadlines({ deadlineHeaderHosts: ['internal', '.corp.example.com', /^api-\d+\.example\.net$/] })`
   */
  deadlineHeaderHosts?: DeadlineHeaderHosts;
  /**
   * Also send the budget as `x-envoy-upstream-rq-timeout-ms`, to the same hosts and with the same
   * value as `x-request-timeout-ms`, so an Envoy the call passes (the sidecar of an Istio mesh, an
   * egress or front proxy) ends it at the deadline as well. Turn it on when your calls to internal
   * hosts go through Envoy and you want the mesh to enforce deadlines the callee does not know of
   * (a callee without lifeline). Envoy obeys it only on requests it counts as internal, and sets
   * the route's timeout aside for it. Default false. (`LIFELINE_ENVOY_UPSTREAM_TIMEOUT=on`.)
   * @example `installHttpDeadlines({ envoyUpstreamTimeout: true })`
   */
  envoyUpstreamTimeout?: boolean;
}

/** The attributes of an outgoing request that rules can match. */
export type RequestAttributes = Readonly<Record<string, string | number>>;

const MATCHABLE = new Set([
  'server.address',
  'server.port',
  'http.request.method',
  'url.scheme',
  'url.path',
  'db.system.name',
  'db.namespace',
  'db.operation.name',
]);

/**
 * A validated policy: `ruleTimeout`, `defaultTimeoutMs` and `headersTimeoutMs` give the budget a
 * call gets, if any, and `headerHosts` the hosts told of it.
 */
export class DeadlinePolicy {
  readonly #rules: readonly DeadlineRule[];
  readonly #defaultTimeoutMs: number | undefined;
  readonly #headersTimeoutMs: number | undefined;
  /** The hosts that get the deadline header. */
  readonly headerHosts: HeaderHosts;
  /** The headers that carry it: `x-request-timeout-ms`, and Envoy's with `envoyUpstreamTimeout`. */
  readonly headerNames: readonly string[];

  constructor(options: DeadlinePolicyOptions = {}) {
    const { policy = [], defaultTimeoutMs, headersTimeoutMs, deadlineHeaderHosts, envoyUpstreamTimeout = false } = options;
    if (typeof envoyUpstreamTimeout !== 'boolean') throw invalidOption('envoyUpstreamTimeout', envoyUpstreamTimeout, 'true or false');
    this.headerNames = envoyUpstreamTimeout ? [DEADLINE_HEADER, ENVOY_UPSTREAM_TIMEOUT_HEADER] : [DEADLINE_HEADER];
    const given: unknown = policy; // checked as what callers may really pass, not as what the type says
    if (!Array.isArray(given)) throw invalidOption('policy', policy, 'an array of rules');
    policy.forEach(validateRule);
    if (defaultTimeoutMs !== undefined) settingOption(SETTINGS.defaultTimeout, defaultTimeoutMs);
    if (headersTimeoutMs !== undefined) settingOption(SETTINGS.headersTimeout, headersTimeoutMs); // 0: no bound
    this.headerHosts = new HeaderHosts(deadlineHeaderHosts);
    this.#rules = policy.map((rule) => ({
      match: Object.fromEntries(Object.entries<RuleValue>(rule.match).map(([key, value]) => [key, stateless(value)])),
      timeoutMs: rule.timeoutMs,
    }));
    this.#defaultTimeoutMs = defaultTimeoutMs;
    this.#headersTimeoutMs = headersTimeoutMs === 0 ? undefined : headersTimeoutMs;
  }

  /** False when no rule exists: calls need no attribute work at all. */
  get hasRules(): boolean {
    return this.#rules.length !== 0;
  }

  /** The budget of the first matching rule, else `undefined`. */
  ruleTimeout(attributes: RequestAttributes): number | undefined {
    for (const rule of this.#rules) {
      if (matches(rule, attributes)) return rule.timeoutMs;
    }
    return undefined;
  }

  /** The budget for calls no context deadline and no rule bounds. */
  get defaultTimeoutMs(): number | undefined {
    return this.#defaultTimeoutMs;
  }

  /** The bound on waiting for the response head of calls nothing else bounds; `undefined`: none. */
  get headersTimeoutMs(): number | undefined {
    return this.#headersTimeoutMs;
  }
}

function matches(rule: DeadlineRule, attributes: RequestAttributes): boolean {
  for (const key in rule.match) {
    const expected = rule.match[key];
    const actual = attributes[key];
    if (actual === undefined) return false;
    if (expected instanceof RegExp ? !expected.test(String(actual)) : String(expected) !== String(actual)) return false;
  }
  return true;
}

function validateRule(rule: unknown, index: number): void {
  const at = `policy[${index}]`;
  if (typeof rule !== 'object' || rule === null) throw invalidOption(at, rule, 'a rule { match, timeoutMs }');
  const { match, timeoutMs } = rule as { match?: unknown; timeoutMs?: unknown };
  numberOption(`${at}.timeoutMs`, timeoutMs, SETTINGS.defaultTimeout); // a rule's budget is bounded as the default's
  if (typeof match !== 'object' || match === null || Object.keys(match).length === 0)
    throw invalidOption(`${at}.match`, match, 'an object with at least one attribute');
  for (const [key, value] of Object.entries(match as Record<string, unknown>)) {
    if (!MATCHABLE.has(key)) throw invalidOption(`${at}.match key`, key, [...MATCHABLE].join(', '));
    if (typeof value !== 'string' && typeof value !== 'number' && !(value instanceof RegExp))
      throw invalidOption(`${at}.match['${key}']`, value, 'a string, number or RegExp');
  }
}
