import type { Context, TextMapGetter, TextMapPropagator, TextMapSetter } from '@opentelemetry/api';
import { contextWithDeadline, deadlineOf, DeadlineScope } from '../deadline/index.js';
import { invalidOption } from '../errors/index.js';

/** The header carrying the caller's remaining budget, in whole milliseconds. */
export const DEADLINE_HEADER = 'x-request-timeout-ms';

/** Options of {@link DeadlinePropagator}. */
export interface DeadlinePropagatorOptions {
  /** Inbound budgets above this are clamped to it. Default 300 000 (5 min). */
  maxInboundMs?: number;
}

/** The header's value for a deadline at `at`: the whole milliseconds left, never negative. */
export function deadlineHeaderValue(at: number): string {
  return String(Math.max(0, Math.floor(at - Date.now())));
}

// At most 10 digits (~115 days): anything longer is not a budget a sane caller sends.
const BUDGET = /^\d{1,10}$/;

/**
 * Carries deadlines across services. Outgoing: the remaining budget of the context's deadline as
 * `x-request-timeout-ms`. Incoming: a valid header becomes the handler's deadline (`source`
 * `inbound`), clamped to `maxInboundMs`. A relative budget, not an absolute time, so the callers'
 * and servers' clocks need not agree. Malformed values are ignored, never thrown on.
 */
export class DeadlinePropagator implements TextMapPropagator {
  readonly #maxInboundMs: number;

  constructor(options: DeadlinePropagatorOptions = {}) {
    const { maxInboundMs = 300_000 } = options;
    if (typeof maxInboundMs !== 'number' || !(maxInboundMs > 0 && maxInboundMs <= 1e12)) throw invalidOption('maxInboundMs', maxInboundMs, 'a number of ms > 0 (at most 1e12)');
    this.#maxInboundMs = maxInboundMs;
  }

  inject(ctx: Context, carrier: unknown, setter: TextMapSetter): void {
    const deadline = deadlineOf(ctx);
    if (deadline === undefined) return;
    setter.set(carrier, DEADLINE_HEADER, deadlineHeaderValue(deadline.at));
  }

  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    let raw: unknown;
    try {
      raw = getter.get(carrier, DEADLINE_HEADER);
    } catch {
      return ctx; // a hostile carrier must not break the request
    }
    // Repeated headers are ambiguous: ignore rather than guess which one the caller meant.
    const value = Array.isArray(raw) ? (raw.length === 1 ? (raw[0] as unknown) : undefined) : raw;
    if (typeof value !== 'string') return ctx;
    const text = value.trim();
    if (!BUDGET.test(text)) return ctx;
    const at = Date.now() + Math.min(Number(text), this.#maxInboundMs);
    const current = deadlineOf(ctx);
    if (current !== undefined && current.at <= at) return ctx;
    return contextWithDeadline(ctx, new DeadlineScope(at, 'inbound'));
  }

  fields(): string[] {
    return [DEADLINE_HEADER];
  }
}
