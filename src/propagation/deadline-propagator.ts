import type { Context, TextMapGetter, TextMapPropagator, TextMapSetter } from '@opentelemetry/api';
import { contextWithDeadline, deadlineOf, DeadlineScope, monotonicNow, shrinks } from '../deadline/index.js';
import {
  BUDGET_HEADERS,
  DEADLINE_HEADER,
  inboundPeerOf,
  InboundDeadlines,
  recordingInboundPeers,
  type InboundDeadlineOptions,
} from '../inbound/index.js';

/**
 * Envoy's header for the timeout of the request it forwards upstream, in whole milliseconds: sent
 * beside {@link DEADLINE_HEADER} with the policy's `envoyUpstreamTimeout`, so the sidecar of an
 * Istio mesh (or any Envoy the call passes) ends the call at the deadline too.
 */
export const ENVOY_UPSTREAM_TIMEOUT_HEADER = 'x-envoy-upstream-rq-timeout-ms';

/** The header's value for a deadline whose monotonic reading is `monotonicAt`: the whole milliseconds left, never negative. */
export function deadlineHeaderValue(monotonicAt: number): string {
  return String(Math.max(0, Math.floor(monotonicAt - monotonicNow())));
}

// Decimal digits only; a sign, fraction, exponent or any other character makes the value malformed.
const BUDGET = /^\d+$/;
// Beyond 15 significant digits Number() stops being exact (and far beyond it, Infinity): such a
// budget is read as "more than any maxInboundMs" without being converted.
const MAX_EXACT_DIGITS = 15;

/** A well-formed budget in ms (`Infinity` when it is too long to convert exactly), or `undefined`. */
function parseBudget(text: string): number | undefined {
  if (!BUDGET.test(text)) return undefined;
  const significant = text.replace(/^0+(?=\d)/, '');
  return significant.length > MAX_EXACT_DIGITS ? Number.POSITIVE_INFINITY : Number(significant);
}

/** The well-formed budget `header` carries, or `undefined` (absent, malformed, repeated, or a carrier that throws). */
function budgetOf(carrier: unknown, getter: TextMapGetter, header: string): number | undefined {
  let raw: unknown;
  try {
    raw = getter.get(carrier, header);
  } catch {
    return undefined; // a hostile carrier must not break the request
  }
  // Repeated headers are ambiguous: ignore rather than guess which one the caller meant.
  const value = Array.isArray(raw) ? (raw.length === 1 ? (raw[0] as unknown) : undefined) : raw;
  return typeof value === 'string' ? parseBudget(value.trim()) : undefined;
}

/**
 * Carries deadlines across services. Outgoing, lifeline's clients (not this propagator) send the
 * remaining budget of a call's deadline as `x-request-timeout-ms` to the hosts `deadlineHeaderHosts`
 * allows; the propagator must still be the SDK's (with W3C trace context and baggage) for them to
 * do it. Incoming: a valid header from a trusted caller becomes the handler's
 * deadline (`source` `inbound`), and so do the budgets of a mesh in front of the service (Envoy's
 * `x-envoy-expected-rq-timeout-ms`, Connect RPC's `connect-timeout-ms`; the smallest wins), raised to `minInboundMs` and clamped to `maxInboundMs` (a budget of any
 * number of digits: an absurdly long one is clamped, not ignored). A relative
 * budget, not an absolute time, so the callers' and servers' clocks need not agree. Malformed
 * values are ignored, never thrown on.
 *
 * Trust is decided by the caller's address, which `extract` is not given: `installInboundTrust()`
 * records it for every node:http/https request that carries a budget, by its `headers` object
 * (`startLifeline` and register mode install it). A carrier it has no record of — headers a
 * framework copied, a message of another transport, any request while it is not installed — has
 * an unknown caller, whose budget only `trustInbound: 'all'` obeys.
 */
export class DeadlinePropagator implements TextMapPropagator {
  readonly #inbound: InboundDeadlines;
  #warned = false;

  /** @throws LifelineError `ERR_INVALID_OPTION` naming the option for a bad `trustInbound`, `minInboundMs` or `maxInboundMs`. */
  constructor(options: InboundDeadlineOptions = {}) {
    this.#inbound = new InboundDeadlines(options);
  }

  /**
   * Sets nothing. The header is set by lifeline's clients (undici/fetch, node:http), which know the
   * host a call goes to (`deadlineHeaderHosts`) and the deadline it got; an instrumentation injects
   * without a host (undici's into an empty object), so from here it would reach every third party.
   */
  inject(_ctx: Context, _carrier: unknown, _setter: TextMapSetter): void {
    // see above
  }

  /**
   * `ctx` with the deadline the request's smallest budget sets (`source` `inbound`, within
   * `minInboundMs`..`maxInboundMs`) when its caller is trusted and that deadline is sooner than
   * `ctx`'s; else `ctx` as it is.
   */
  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    const { trust } = this.#inbound;
    if (trust.fixed === false) return ctx;
    // The smallest budget of the caller's and the mesh's wins.
    let budget: number | undefined;
    for (const header of BUDGET_HEADERS) {
      const given = budgetOf(carrier, getter, header);
      if (given !== undefined && (budget === undefined || given < budget)) budget = given;
    }
    if (budget === undefined) return ctx;
    if (!trust.trusts(inboundPeerOf(carrier))) {
      this.#warnUnrecorded();
      return ctx;
    }
    const ms = this.#inbound.budgetMs(budget);
    const current = deadlineOf(ctx);
    if (!shrinks(current, monotonicNow() + ms)) return ctx;
    return contextWithDeadline(ctx, DeadlineScope.after(ms, 'inbound'));
  }

  // Once: with nothing recording peers every inbound deadline is ignored, which looks like a bug.
  #warnUnrecorded(): void {
    if (this.#warned || recordingInboundPeers()) return;
    this.#warned = true;
    process.emitWarning(
      `${DEADLINE_HEADER} ignored: the caller's address is unknown (call installInboundTrust(), or set trustInbound to 'all')`,
      {
        code: 'LIFELINE_INBOUND_PEER_UNKNOWN',
      },
    );
  }

  /**
   * `['x-request-timeout-ms']` ({@link DEADLINE_HEADER}), lifeline's own header; the mesh's budget
   * headers `extract` reads as well are not listed.
   */
  fields(): string[] {
    return [DEADLINE_HEADER];
  }
}
