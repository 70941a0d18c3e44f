import { context, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { contextWithDeadline, deadlineOf, DeadlineScope, ensureContextManager, runThenSettle, shrinks } from '../deadline/index.js';
import { errorText, LifelineError } from '../errors/index.js';
import {
  ATTR_DEADLINE_AT,
  ATTR_DEADLINE_BUDGET_MS,
  ATTR_DEADLINE_EXCEEDED,
  ATTR_DEADLINE_SOURCE,
  ATTR_HEALTH_COMPONENT,
  ATTR_HEALTH_PROBE,
  ATTR_HEALTH_TICK,
  isoTime,
} from '../semconv/index.js';

/**
 * A probe, by Kubernetes' names (`livenessProbe`, `readinessProbe`, `startupProbe`): what a
 * component answers to (`registerLiveness`…), what `status()` is asked for, and what
 * `lifeline.health.probe` records. The probe server serves them at `/live`, `/ready`, `/startup`.
 */
export type ProbeKind = 'liveness' | 'readiness' | 'startup';

/**
 * The old name of {@link ProbeKind}.
 * @deprecated Renamed {@link ProbeKind}: one vocabulary for probes.
 */
export type ComponentProbe = ProbeKind;

/** @internal What a tick is made from when a component takes it. */
export interface TickInit {
  component: string;
  probe: ProbeKind;
  seq: number;
  issuedAt: number;
  deadline: number;
  /** `deadline` on the monotonic clock, read when the round issued it. */
  deadlineMonotonic: number;
  tracer: Tracer;
}

/**
 * One permission to work, handed to a component by its catalog. The component must be back for its
 * next tick before `deadline`; work done in `run` is bounded by that deadline and traced as a child
 * of the tick's span.
 */
export class Tick {
  /** The component this tick was issued to. */
  readonly component: string;
  /** 1 for the first tick the component took, then 2, 3, … */
  readonly seq: number;
  /** When the catalog issued the tick, epoch ms. */
  readonly issuedAt: number;
  /** When the component must be back for its next tick, epoch ms. */
  readonly deadline: number;
  readonly #span: Span;
  readonly #scope: DeadlineScope;
  #ran = false;
  #ended = false;

  /** @internal Ticks come from a component handle, never from user code. */
  constructor(init: TickInit) {
    this.component = init.component;
    this.seq = init.seq;
    this.issuedAt = init.issuedAt;
    this.deadline = init.deadline;
    this.#scope = new DeadlineScope(init.deadline, 'tick', init.deadlineMonotonic);
    // No startTime of our own: the SDK's clock, which its children use too (a Date.now() start put
    // the tick up to a millisecond after its first child, and Jaeger flagged clock skew).
    this.#span = init.tracer.startSpan(`tick ${init.component}`, {
      kind: SpanKind.INTERNAL,
      root: true,
      attributes: {
        [ATTR_HEALTH_COMPONENT]: init.component,
        [ATTR_HEALTH_PROBE]: init.probe,
        [ATTR_HEALTH_TICK]: init.seq,
        [ATTR_DEADLINE_AT]: isoTime(init.deadline),
        [ATTR_DEADLINE_BUDGET_MS]: this.#scope.remainingMs(),
        [ATTR_DEADLINE_SOURCE]: 'tick',
      },
    });
  }

  /** @internal The tick span's trace and span ids, for diagnostics. */
  get spanContext(): { traceId: string; spanId: string } {
    return this.#span.spanContext();
  }

  /** Aborts at `deadline` with a `DeadlineExceededError` reason; released once `run` settles. */
  get signal(): AbortSignal {
    return this.#scope.signal;
  }

  /**
   * Runs `fn` inside this tick's span and deadline, returning what `fn` returns. The span ends when
   * the result settles. A tick is run at most once.
   * @throws LifelineError `ERR_TICK_ALREADY_RUN` on a second call.
   */
  run<T>(fn: () => T): T {
    if (this.#ran) throw new LifelineError('ERR_TICK_ALREADY_RUN', `tick ${this.seq} of ${JSON.stringify(this.component)} was already run`);
    this.#ran = true;
    ensureContextManager();
    const active = context.active();
    let ctx = trace.setSpan(active, this.#span);
    // A tick run inside a tighter scope keeps the tighter deadline.
    if (shrinks(deadlineOf(active), this.#scope.monotonicAt)) ctx = contextWithDeadline(ctx, this.#scope);
    return runThenSettle(
      () => context.with(ctx, fn),
      (settlement) => {
        if (settlement.failed) {
          const message = errorText(settlement.error);
          this.#span.recordException(settlement.error instanceof Error ? settlement.error : message);
          this.#span.setStatus({ code: SpanStatusCode.ERROR, message });
        }
        this.#end();
      },
    );
  }

  /** @internal Ends the span of a tick that was never run: the next tick was taken or the handle went. */
  retire(): void {
    if (!this.#ran) this.#end();
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#scope.release();
    if (this.#scope.passed()) {
      this.#span.setAttribute(ATTR_DEADLINE_EXCEEDED, true);
      this.#span.setStatus({ code: SpanStatusCode.ERROR, message: 'deadline exceeded' });
    }
    this.#span.end(); // the SDK's clock, as its start and its children
  }
}
