import { invalidOption } from '../errors/index.js';

/** Attribute values a rule can match: equal strings or numbers, or a RegExp tested against the string form. */
export type RuleValue = string | number | RegExp;

/**
 * A deadline enforced from a call's OpenTelemetry semantic-convention attributes, e.g.
 * `{ match: { 'server.address': 'kubelet.local', 'http.request.method': 'GET' }, timeoutMs: 2000 }`.
 * Matchable keys: `server.address`, `server.port`, `http.request.method`, `url.scheme`, `url.path`.
 */
export interface DeadlineRule {
  readonly match: Readonly<Record<string, RuleValue>>;
  readonly timeoutMs: number;
}

/** Options shared by the dispatcher and the interceptor. */
export interface DeadlinePolicyOptions {
  /** Rules tried in order; the first whose every key matches gives the call `now + timeoutMs`. */
  policy?: readonly DeadlineRule[];
  /** Bounds calls that have no deadline at all (no context deadline, no matching rule). */
  defaultTimeoutMs?: number;
}

/** The attributes of an outgoing request that rules can match. */
export type RequestAttributes = Readonly<Record<string, string | number>>;

const MATCHABLE = new Set(['server.address', 'server.port', 'http.request.method', 'url.scheme', 'url.path']);

/** A validated policy: `ruleTimeout` and `defaultTimeoutMs` give the budget a call gets, if any. */
export class DeadlinePolicy {
  readonly #rules: readonly DeadlineRule[];
  readonly #defaultTimeoutMs: number | undefined;

  constructor(options: DeadlinePolicyOptions = {}) {
    const { policy = [], defaultTimeoutMs } = options;
    const given: unknown = policy; // checked as what callers may really pass, not as what the type says
    if (!Array.isArray(given)) throw invalidOption('policy', policy, 'an array of rules');
    policy.forEach(validateRule);
    if (defaultTimeoutMs !== undefined && !isBudget(defaultTimeoutMs)) throw invalidOption('defaultTimeoutMs', defaultTimeoutMs, 'a number of ms > 0 (at most 1e15)');
    this.#rules = policy.map((rule) => ({
      match: Object.fromEntries(Object.entries<RuleValue>(rule.match).map(([key, value]) => [key, stateless(value)])),
      timeoutMs: rule.timeoutMs,
    }));
    this.#defaultTimeoutMs = defaultTimeoutMs;
  }

  /** True when no rule and no default exist: calls need no attribute work at all. */
  get empty(): boolean {
    return this.#rules.length === 0 && this.#defaultTimeoutMs === undefined;
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

/** A /g or /y RegExp remembers `lastIndex` between tests: matching calls must not depend on history. */
function stateless(value: RuleValue): RuleValue {
  return value instanceof RegExp && (value.global || value.sticky) ? new RegExp(value.source, value.flags.replace(/[gy]/g, '')) : value;
}

function validateRule(rule: unknown, index: number): void {
  const at = `policy[${index}]`;
  if (typeof rule !== 'object' || rule === null) throw invalidOption(at, rule, 'a rule { match, timeoutMs }');
  const { match, timeoutMs } = rule as { match?: unknown; timeoutMs?: unknown };
  if (!isBudget(timeoutMs)) throw invalidOption(`${at}.timeoutMs`, timeoutMs, 'a number of ms > 0 (at most 1e15)');
  if (typeof match !== 'object' || match === null || Object.keys(match).length === 0) throw invalidOption(`${at}.match`, match, 'an object with at least one attribute');
  for (const [key, value] of Object.entries(match as Record<string, unknown>)) {
    if (!MATCHABLE.has(key)) throw invalidOption(`${at}.match key`, key, [...MATCHABLE].join(', '));
    if (typeof value !== 'string' && typeof value !== 'number' && !(value instanceof RegExp)) throw invalidOption(`${at}.match['${key}']`, value, 'a string, number or RegExp');
  }
}

/** A budget a Date can still hold once added to now (about 31,700 years is plenty). */
const MAX_BUDGET_MS = 1e15;

function isBudget(value: unknown): value is number {
  return typeof value === 'number' && value > 0 && value <= MAX_BUDGET_MS;
}
