import type { Tracer } from '@opentelemetry/api';
import type { DiagnosedComponent } from '../diagnostics/index.js';
import { LifelineError } from '../errors/index.js';
import { Tick, type ProbeKind } from './tick.js';

/** A tick waiting in a component's buffer: just two numbers until the component takes it. */
interface BufferedTick {
  readonly issuedAt: number;
  readonly deadline: number;
  readonly deadlineMonotonic: number;
}

/** @internal One component as health metrics report it. */
export interface ComponentReport {
  readonly name: string;
  readonly probe: ProbeKind;
  readonly healthy: boolean;
  /** How long its oldest tick has waited to be taken (ms; 0 when none waits): how far behind it is. */
  readonly lagMs: number;
  /** Times it turned unhealthy since it was registered. */
  readonly verdicts: number;
}

/** @internal What a handle needs from its catalog. */
export interface ComponentInit {
  name: string;
  probe: ProbeKind;
  once: boolean;
  bufferSize: number;
  registeredAt: number;
  firstDeadline: number;
  firstDeadlineMonotonic: number;
  tracer: Tracer;
  onDeregister: (component: ComponentHandle) => void;
}

/**
 * A registered component's end of the catalog: it takes ticks with `take()`, `next()` or
 * `for await`, and stays healthy as long as it keeps its tick buffer from filling up.
 */
export class ComponentHandle implements AsyncIterable<Tick>, Disposable {
  /** The component's name, unique in its catalog. */
  readonly name: string;
  /** The probe this component answers to. */
  readonly probe: ProbeKind;
  readonly #once: boolean;
  readonly #bufferSize: number;
  readonly #tracer: Tracer;
  readonly #onDeregister: (component: ComponentHandle) => void;
  readonly #buffer: BufferedTick[] = [];
  /** Pending `next()` calls, oldest first; each gets a tick of its own (an aborted one leaves). */
  readonly #waiters = new Set<(tick: Tick | undefined) => void>();
  #healthy = false;
  #verdicts = 0;
  #seq = 0;
  #current: Tick | undefined;
  #closed = false;
  #deregistered = false;

  /** @internal Handles come from `HealthCatalog.register*`. */
  constructor(init: ComponentInit) {
    this.name = init.name;
    this.probe = init.probe;
    this.#once = init.once;
    this.#bufferSize = init.bufferSize;
    this.#tracer = init.tracer;
    this.#onDeregister = init.onDeregister;
    // A full buffer at registration: the component is unhealthy until it takes a tick and a round passes.
    for (let i = 0; i < init.bufferSize; i++)
      this.#buffer.push({ issuedAt: init.registeredAt, deadline: init.firstDeadline, deadlineMonotonic: init.firstDeadlineMonotonic });
  }

  /** @internal What diagnostics need: the name, probe and the trace of the last tick taken. */
  diagnosed(): DiagnosedComponent {
    const tick = this.#current;
    return {
      name: this.name,
      probe: this.probe,
      tick: tick === undefined ? undefined : { ...tick.spanContext, seq: tick.seq, deadline: tick.deadline },
    };
  }

  /** @internal The component for health metrics, at `now` (epoch ms). */
  report(now: number): ComponentReport {
    const oldest = this.#buffer[0];
    return {
      name: this.name,
      probe: this.probe,
      healthy: this.#healthy,
      lagMs: oldest === undefined ? 0 : Math.max(0, now - oldest.issuedAt),
      verdicts: this.#verdicts,
    };
  }

  /** @internal The verdict of the last ping round. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /**
   * @internal One ping round: offer a tick; the component is healthy iff its buffer had room.
   * Returns whether the verdict changed.
   */
  ping(issuedAt: number, deadline: number, deadlineMonotonic: number): boolean {
    if (this.#once && this.#healthy) return false;
    const before = this.#healthy;
    if (this.#buffer.length < this.#bufferSize) {
      this.#healthy = true;
      const waiter = this.#waiters.values().next().value;
      if (waiter === undefined) {
        this.#buffer.push({ issuedAt, deadline, deadlineMonotonic });
      } else {
        this.#waiters.delete(waiter);
        waiter(this.#issue({ issuedAt, deadline, deadlineMonotonic }));
      }
    } else {
      this.#healthy = false;
      if (before) this.#verdicts++;
    }
    return before !== this.#healthy;
  }

  /** The oldest buffered tick, or `undefined` when none is waiting (never blocks). */
  take(): Tick | undefined {
    if (this.#closed) return undefined;
    const buffered = this.#buffer.shift();
    return buffered === undefined ? undefined : this.#issue(buffered);
  }

  /**
   * The next tick, waiting for one if none is buffered; `undefined` once the handle is closed or
   * `signal` aborts. Like a receive on a Go channel, a call you abandon keeps waiting (and takes a
   * tick when one comes): pass a `signal` if you may give up on it.
   */
  next(options: { signal?: AbortSignal } = {}): Promise<Tick | undefined> {
    const tick = this.take();
    const { signal } = options;
    if (tick !== undefined || this.#closed || signal?.aborted === true) return Promise.resolve(tick);
    return new Promise((resolve) => {
      if (signal === undefined) {
        this.#waiters.add(resolve);
        return;
      }
      const onAbort = (): void => {
        this.#waiters.delete(waiter);
        resolve(undefined);
      };
      const waiter = (delivered: Tick | undefined): void => {
        signal.removeEventListener('abort', onAbort);
        resolve(delivered);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter);
    });
  }

  /** Ticks as they come; ends when the handle is deregistered or the catalog closed. */
  async *[Symbol.asyncIterator](): AsyncGenerator<Tick, void, undefined> {
    for (;;) {
      const tick = await this.next();
      if (tick === undefined) return;
      yield tick;
    }
  }

  /**
   * Removes the component from its catalog. Pending `next()` calls settle with `undefined`.
   * A no-op after the catalog was closed.
   * @throws LifelineError `ERR_NOT_REGISTERED` when the handle was already deregistered.
   */
  deregister(): void {
    if (this.#deregistered) throw new LifelineError('ERR_NOT_REGISTERED', `component ${JSON.stringify(this.name)} is not registered`);
    this.#deregistered = true;
    if (this.#closed) return;
    this.close();
    this.#onDeregister(this);
  }

  /** Same as {@link ComponentHandle.deregister}, for `using`. */
  [Symbol.dispose](): void {
    this.deregister();
  }

  /** @internal Ends the handle: no more ticks, waiters settle, an unrun tick's span ends. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#buffer.length = 0;
    for (const waiter of this.#waiters) waiter(undefined);
    this.#waiters.clear();
    this.#current?.retire();
    this.#current = undefined;
  }

  #issue(buffered: BufferedTick): Tick {
    this.#current?.retire();
    const tick = new Tick({
      component: this.name,
      probe: this.probe,
      seq: ++this.#seq,
      issuedAt: buffered.issuedAt,
      deadline: buffered.deadline,
      deadlineMonotonic: buffered.deadlineMonotonic,
      tracer: this.#tracer,
    });
    this.#current = tick;
    return tick;
  }
}
