import { invalidOption } from '../errors/index.js';
import { PeerTrust, type TrustInbound } from './peer-trust.js';

/** How a server turns a caller's deadline (HTTP `x-request-timeout-ms`, gRPC `grpc-timeout`) into its own. */
export interface InboundDeadlineOptions {
  /**
   * Whose deadlines are obeyed, by the caller's address: `'private'` (default: loopback, RFC 1918,
   * link-local, IPv6 ULA `fc00::/7`, CGNAT `100.64.0.0/10`, Unix sockets), `'all'`, `'none'`, or a
   * list of IP addresses and CIDR ranges (`['10.0.0.0/8', 'fd00::/8']`). Others' budgets are ignored.
   */
  trustInbound?: TrustInbound;
  /** Inbound budgets below this are raised to it, so a caller cannot starve the work below. Default 0 (none). */
  minInboundMs?: number;
  /** Inbound budgets above this are clamped to it. Default 300 000 (5 min). */
  maxInboundMs?: number;
}

const MAX_BUDGET_MS = 1e12;
/** The most of a caller's budget a server takes unless told otherwise (`maxInboundMs`): 5 min. */
export const DEFAULT_MAX_INBOUND_MS = 300_000;

/**
 * The trust rule and budget bounds of one server, validated once: HTTP's propagator and gRPC's
 * handler wrapper both decide through it, so the two transports cannot disagree.
 */
export class InboundDeadlines {
  readonly trust: PeerTrust;
  readonly #minMs: number;
  readonly #maxMs: number;

  /** @throws LifelineError `ERR_INVALID_OPTION` naming the option for a bad value. */
  constructor(options: InboundDeadlineOptions = {}) {
    const { trustInbound = 'private', minInboundMs = 0, maxInboundMs = DEFAULT_MAX_INBOUND_MS } = options;
    if (typeof maxInboundMs !== 'number' || !(maxInboundMs > 0 && maxInboundMs <= MAX_BUDGET_MS))
      throw invalidOption('maxInboundMs', maxInboundMs, `a number of ms > 0 (at most ${String(MAX_BUDGET_MS)})`);
    if (typeof minInboundMs !== 'number' || !(minInboundMs >= 0 && minInboundMs <= maxInboundMs))
      throw invalidOption('minInboundMs', minInboundMs, `a number of ms >= 0 and at most maxInboundMs (${String(maxInboundMs)})`);
    this.trust = new PeerTrust(trustInbound);
    this.#minMs = minInboundMs;
    this.#maxMs = maxInboundMs;
  }

  /** A caller's budget of `budgetMs`, raised to the minimum and clamped to the maximum: the ms the server gives the work. */
  budgetMs(budgetMs: number): number {
    return Math.min(Math.max(budgetMs, this.#minMs), this.#maxMs);
  }
}
