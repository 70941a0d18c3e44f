// The catalog, one class (~420 lines): its rounds, registrations and verdict cache share private
// state, so they stay together; its options and a probe's status are in catalog-options.ts.
import type { TracerProvider, Tracer } from '@opentelemetry/api';
import { ensureContextManager, monotonicNow } from '../deadline/index.js';
import {
  Diagnostics,
  type DiagnosedComponent,
  type DiagnosticSnapshot,
  type DiagnosticsOptions,
  type HealthDiagnostics,
} from '../diagnostics/index.js';
import { invalidOption, LifelineError, numberOption, oneOf } from '../errors/index.js';
import { defaultLogger, logSwallowed, type Logger } from '../log/index.js';
import { scopeTracer } from '../semconv/index.js';
import { SETTINGS, settingOption } from '../settings/index.js';
import { ComponentHandle, type ComponentReport } from './component.js';
import type { HealthCatalogOptions, HealthStatus, RegisterOptions } from './catalog-options.js';
import type { ProbeKind } from './tick.js';

/** The catalog's own entry: it watches that ping rounds keep happening. */
export const SELF_COMPONENT = 'healthcheck';
/** The entry that fails readiness once the process is draining (`drain()`). */
export const DRAIN_COMPONENT = 'shutdown';
const RESERVED = [SELF_COMPONENT, DRAIN_COMPONENT];

/** Every probe. */
export const PROBE_KINDS: readonly ProbeKind[] = ['liveness', 'readiness', 'startup'];
// The probe server's paths, which status() still takes: `/live`, `/ready`, `/startup`.
const PATHS: ReadonlyMap<unknown, ProbeKind> = new Map([
  ['live', 'liveness'],
  ['ready', 'readiness'],
  ['startup', 'startup'],
]);
const MEMBERS: Record<ProbeKind, readonly ProbeKind[]> = {
  liveness: ['liveness'],
  readiness: ['liveness', 'readiness'],
  startup: ['startup'],
};

interface Verdicts {
  healthy: string[];
  unhealthy: string[];
  /** The last status built from these verdicts, and the time-dependent parts it was built with. */
  status?: { selfHealthy: boolean; draining: boolean; status: HealthStatus };
}

// Set by the class's static block: lifeline's wiring reaches private state without public members.
let useIntervalLater: (catalog: HealthCatalog, interval: () => number | undefined) => void;
let replaceDiagnostics: (catalog: HealthCatalog, diagnostics: DiagnosticsOptions | HealthDiagnostics) => void;

/**
 * A health catalog. Every `interval` it offers each registered component a tick; a component
 * that left more than `maxMissedTicks` untaken is unhealthy. Verdicts change only at rounds, so
 * `status()` is a cheap read that never waits on a component. Most services use the process-wide
 * one, `health`; a catalog of your own serves its own probes.
 * @example
 * ```ts
 * import { HealthCatalog, startProbeServer } from 'otel-lifeline';
 *
 * const catalog = new HealthCatalog({ interval: 5_000 });
 * const worker = catalog.registerLiveness('worker');
 * await startProbeServer({ health: catalog, port: 0 });
 * ```
 */
export class HealthCatalog {
  /** Ticks a component may leave untaken and stay healthy (see {@link HealthCatalogOptions.maxMissedTicks}). */
  readonly maxMissedTicks: number;
  /** The interval, once known; until then how to learn it (see {@link processCatalog}). */
  #interval: number | undefined;
  #intervalLater: (() => number | undefined) | undefined;
  readonly #tracer: Tracer;
  readonly #tracerProvider: TracerProvider | undefined;
  #diagnostics: HealthDiagnostics;
  /** Whether the catalog made `#diagnostics` (from options): only then is it the catalog's to close. */
  #ownsDiagnostics = false;
  readonly #components = new Map<string, ComponentHandle>();
  #timer: NodeJS.Timeout | undefined;
  /** What the self-check measures from: the last round, or when the timer (re)started. */
  #lastRound = 0;
  #closed = false;
  #draining = false;
  /** Sorted verdicts per probe, rebuilt after a round or a (de)registration changed them. */
  #verdicts: Partial<Record<ProbeKind, Verdicts>> = {};
  /** Told when a verdict may have changed (see {@link HealthCatalog.onVerdictChange}). */
  readonly #onChange = new Set<() => void>();
  /** The user's logger, if given; else lifeline's own, taken when there is something to say. */
  readonly #logger: Logger | undefined;

  constructor(options: HealthCatalogOptions = {}) {
    // eslint-disable-next-line @typescript-eslint/no-deprecated -- read for those who still pass it
    const { interval, buffer, tracerProvider, diagnostics, logger } = options;
    const maxMissedTicks = options.maxMissedTicks ?? buffer ?? 2;
    if (interval !== undefined) this.#interval = checkedInterval(interval);
    numberOption(options.maxMissedTicks === undefined && buffer !== undefined ? 'buffer' : 'maxMissedTicks', maxMissedTicks, {
      min: 1,
      max: 1_000_000,
      integer: true,
    });
    this.maxMissedTicks = maxMissedTicks;
    this.#tracer = scopeTracer(tracerProvider);
    this.#tracerProvider = tracerProvider;
    this.#logger = logger;
    this.#diagnostics = this.#diagnosticsFrom(diagnostics);
  }

  /**
   * The old name of {@link HealthCatalog.maxMissedTicks}.
   * @deprecated Renamed {@link HealthCatalog.maxMissedTicks}.
   */
  get buffer(): number {
    return this.maxMissedTicks;
  }

  /** Ms between ping rounds. */
  get interval(): number {
    return (this.#interval ??= checkedInterval(this.#intervalLater?.() ?? DEFAULT_INTERVAL_MS));
  }

  /**
   * How long ping rounds may stop (a blocked event loop, a stopped timer) before the catalog's own
   * `healthcheck` is unhealthy: two intervals.
   */
  get stallAfterMs(): number {
    return 2 * this.interval;
  }

  static {
    // Lifeline's own wiring, through functions of this module rather than members a user could call.
    useIntervalLater = (catalog, interval) => {
      catalog.#intervalLater = interval;
    };
    replaceDiagnostics = (catalog, diagnostics) => {
      const previous = catalog.#diagnostics;
      const owned = catalog.#ownsDiagnostics;
      catalog.#diagnostics = catalog.#diagnosticsFrom(diagnostics);
      if (owned) previous.close?.();
    };
  }

  /** A diagnostic snapshot of the components unhealthy now: in-flight span trees and the process view. */
  diagnose(): DiagnosticSnapshot {
    return this.#diagnostics.snapshot(this.#unhealthyComponents());
  }

  /**
   * Registers a component for liveness (and therefore readiness): it stays healthy while it keeps
   * taking its ticks; work run in a tick is bounded by the tick's deadline.
   *
   * @example
   * ```ts
   * const poller = health.registerLiveness('poller');
   * for await (const tick of poller) {
   *   await tick.run(() => fetch(upstreamUrl)); // ends at the tick's deadline if upstream hangs
   * }
   * ```
   */
  registerLiveness(name: string, options?: RegisterOptions): ComponentHandle {
    return this.#register(name, 'liveness', options?.once ?? false);
  }

  /** Registers a component for readiness only: a failing dependency takes the pod out of service without restarting it. */
  registerReadiness(name: string, options?: RegisterOptions): ComponentHandle {
    return this.#register(name, 'readiness', options?.once ?? false);
  }

  /** Registers a startup component; startup components are always `once`. */
  registerStartup(name: string): ComponentHandle {
    return this.#register(name, 'startup', true);
  }

  /**
   * The verdicts for one probe: `liveness` = liveness components, `readiness` = liveness ∪
   * readiness, `startup` = startup components; each with the catalog's own `healthcheck`. A read:
   * nothing changes. The probe servers' short names (`live`, `ready`) are still taken.
   */
  status(probe: ProbeKind | 'live' | 'ready' = 'readiness'): HealthStatus {
    const kind = oneOf('probe', PATHS.get(probe) ?? probe, PROBE_KINDS);
    const verdicts = (this.#verdicts[kind] ??= this.#collect(kind));
    const selfHealthy = this.#selfHealthy();
    const draining = this.#draining && kind === 'readiness';
    // Probes ask far more often than verdicts change: the same frozen status serves them all.
    const cached = verdicts.status;
    if (cached !== undefined && cached.selfHealthy === selfHealthy && cached.draining === draining) return cached.status;
    const healthy = selfHealthy ? insertSorted(verdicts.healthy, SELF_COMPONENT) : verdicts.healthy.slice();
    let unhealthy = selfHealthy ? verdicts.unhealthy.slice() : insertSorted(verdicts.unhealthy, SELF_COMPONENT);
    if (draining) unhealthy = insertSorted(unhealthy, DRAIN_COMPONENT);
    const status = Object.freeze({ ok: unhealthy.length === 0, healthy: Object.freeze(healthy), unhealthy: Object.freeze(unhealthy) });
    verdicts.status = { selfHealthy, draining, status };
    return status;
  }

  /**
   * The process is shutting down: from now on readiness fails (with `shutdown` unhealthy) so no
   * new traffic arrives, while liveness is untouched so nothing restarts the pod mid-drain.
   */
  drain(): void {
    this.#draining = true;
    this.#changed();
  }

  /**
   * @internal Calls `listener` whenever a verdict may have changed (a round that changed one, a
   * component registered or gone, draining): how probes served from another thread learn of it at
   * once rather than at their next poll. Returns the function that stops it.
   */
  onVerdictChange(listener: () => void): () => void {
    this.#onChange.add(listener);
    return () => this.#onChange.delete(listener);
  }

  #changed(): void {
    this.#verdicts = {};
    for (const listener of this.#onChange) {
      try {
        listener();
      } catch (error) {
        // A listener's failure must not stop the round that reports liveness.
        logSwallowed(this.#logger ?? defaultLogger(), 'a verdict listener', error);
      }
    }
  }

  /** @internal Every registered component for health metrics, in registration order. */
  report(): ComponentReport[] {
    const now = Date.now();
    const result: ComponentReport[] = [];
    for (const component of this.#components.values()) result.push(component.report(now));
    return result;
  }

  /**
   * Runs one ping round now, what the timer does every `interval`: offers each component a tick and
   * judges it, so verdicts may change (a component that has not taken its ticks turns unhealthy at
   * once). For tests and tools; a probe handler reads {@link HealthCatalog.status}, which changes nothing.
   */
  runRound(): void {
    if (this.#closed) return;
    const now = Date.now();
    const budget = this.interval * this.maxMissedTicks;
    const deadline = now + budget;
    const deadlineMonotonic = monotonicNow() + budget;
    let changed = false;
    const turned: DiagnosedComponent[] = [];
    for (const component of this.#components.values()) {
      if (!component.ping(now, deadline, deadlineMonotonic)) continue;
      changed = true;
      if (!component.healthy) turned.push(component.diagnosed());
    }
    this.#lastRound = monotonicNow();
    if (changed) this.#changed();
    try {
      this.#diagnostics.onRound(turned, turned.length > 0 || this.#hasUnhealthy(), () => this.#unhealthyComponents());
    } catch (error) {
      // Explaining a verdict must never take down the process whose liveness it reports.
      logSwallowed(this.#logger ?? defaultLogger(), 'explaining a verdict', error);
    }
  }

  /**
   * The old name of {@link HealthCatalog.runRound}.
   * @deprecated Renamed {@link HealthCatalog.runRound}: it runs a round and may change verdicts.
   */
  check(): void {
    this.runRound();
  }

  /**
   * Stops the timer and closes every handle; pending `next()` calls settle. Closes the diagnostics
   * the catalog made from options, not a `diagnostics` object it was given. Idempotent.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stopTimer();
    for (const component of this.#components.values()) component.close();
    this.#components.clear();
    this.#changed();
    this.#onChange.clear();
    if (this.#ownsDiagnostics) this.#diagnostics.close?.();
  }

  /** Diagnostics given as an object are used as they are (and closed by whoever made them); options make the built-in ones. */
  #diagnosticsFrom(given: DiagnosticsOptions | HealthDiagnostics | undefined): HealthDiagnostics {
    this.#ownsDiagnostics = given === undefined || !('onRound' in given);
    if (given !== undefined && 'onRound' in given) return given;
    return new Diagnostics({
      ...(this.#tracerProvider === undefined ? {} : { tracerProvider: this.#tracerProvider }),
      ...(this.#logger === undefined ? {} : { logger: this.#logger }),
      ...given,
    });
  }

  #hasUnhealthy(): boolean {
    for (const component of this.#components.values()) if (!component.healthy) return true;
    return false;
  }

  #unhealthyComponents(): DiagnosedComponent[] {
    const result: DiagnosedComponent[] = [];
    for (const component of this.#components.values()) if (!component.healthy) result.push(component.diagnosed());
    return result.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  #register(name: string, probe: ProbeKind, once: boolean): ComponentHandle {
    if (typeof name !== 'string' || name.trim() === '') throw invalidOption('name', name, 'a non-empty string');
    if (RESERVED.includes(name))
      throw invalidOption('name', name, `a name other than the reserved ${RESERVED.map((r) => JSON.stringify(r)).join(' and ')}`);
    if (typeof once !== 'boolean') throw invalidOption('once', once, 'a boolean');
    if (this.#closed) throw new LifelineError('ERR_CLOSED', `cannot register ${JSON.stringify(name)}: the catalog is closed`);
    if (this.#components.has(name))
      throw new LifelineError('ERR_DUPLICATE_COMPONENT', `component ${JSON.stringify(name)} is already registered`);
    ensureContextManager();
    const now = Date.now();
    const component = new ComponentHandle({
      name,
      probe,
      once,
      bufferSize: this.maxMissedTicks,
      registeredAt: now,
      firstDeadline: now + this.interval,
      firstDeadlineMonotonic: monotonicNow() + this.interval,
      tracer: this.#tracer,
      onDeregister: (gone) => {
        this.#deregister(gone);
      },
    });
    this.#components.set(name, component);
    this.#changed();
    if (this.#timer === undefined) this.#startTimer();
    return component;
  }

  #deregister(component: ComponentHandle): void {
    this.#components.delete(component.name);
    this.#changed();
    if (this.#components.size === 0) this.#stopTimer();
  }

  #startTimer(): void {
    this.#lastRound = monotonicNow();
    // unref: a catalog never keeps a process alive.
    this.#timer = setInterval(() => {
      this.runRound();
    }, this.interval).unref();
  }

  #stopTimer(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /**
   * The self-check: rounds must keep coming while there is something to ping. With no components
   * no timer runs and there is nothing to stall; a closed catalog checks nothing, so it fails.
   */
  #selfHealthy(): boolean {
    if (this.#closed) return false;
    if (this.#timer === undefined) return true;
    // On the monotonic clock: a wall clock stepped forward failed a healthy process (a restart for
    // nothing), and stepped back hid a stalled one for the length of the step.
    return monotonicNow() - this.#lastRound <= this.stallAfterMs;
  }

  #collect(probe: ProbeKind): Verdicts {
    const members = MEMBERS[probe];
    const healthy: string[] = [];
    const unhealthy: string[] = [];
    for (const component of this.#components.values()) {
      if (members.includes(component.probe)) (component.healthy ? healthy : unhealthy).push(component.name);
    }
    return { healthy: healthy.sort(), unhealthy: unhealthy.sort() };
  }
}

const DEFAULT_INTERVAL_MS = 15_000;

function checkedInterval(interval: number): number {
  // A timer cannot wait longer than 2^31-1 ms (it would fire every ms instead).
  settingOption(SETTINGS.healthInterval, interval);
  return interval;
}

/**
 * The process-wide catalog, whose interval is read (by `interval`) only when first needed: at the
 * first registration, or when lifeline starts. Importing lifeline reads no setting, so a bad one
 * fails where it is used, naming the variable, not the import of a module that may only want types.
 */
export function processCatalog(interval: () => number | undefined): HealthCatalog {
  const catalog = new HealthCatalog();
  useIntervalLater(catalog, interval);
  return catalog;
}

/**
 * Replaces how `catalog`'s verdicts explain themselves, closing diagnostics the catalog made. The
 * process-wide `health` exists from the import of lifeline, before an SDK does: `startLifeline`
 * gives it the diagnostics that read the `InFlightSpanProcessor` registered with that SDK.
 */
export function useDiagnostics(catalog: HealthCatalog, diagnostics: DiagnosticsOptions | HealthDiagnostics): void {
  replaceDiagnostics(catalog, diagnostics);
}

function insertSorted(sorted: readonly string[], name: string): string[] {
  const result = sorted.slice();
  let i = 0;
  while (i < result.length && (result[i] as string) < name) i++;
  result.splice(i, 0, name);
  return result;
}

/**
 * The old name of the {@link HealthCatalog} class.
 * @deprecated Renamed {@link HealthCatalog}: a catalog, beside the `health` instance. Goes in 1.0.
 */
export const Health = HealthCatalog;
/**
 * The old name of the {@link HealthCatalog} type.
 * @deprecated Renamed {@link HealthCatalog}.
 */
export type Health = HealthCatalog;
/**
 * The old name of {@link HealthCatalogOptions}.
 * @deprecated Renamed {@link HealthCatalogOptions}.
 */
export type HealthOptions = HealthCatalogOptions;
