import { metrics, type BatchObservableResult, type MeterProvider, type Observable } from '@opentelemetry/api';
import { ProcessView } from '../diagnostics/index.js';
import { numberOption } from '../errors/index.js';
import { installed, type Installed } from '../install/index.js';
import type { ProbeKind, HealthCatalog } from '../health/index.js';
import { cpuStarvation } from '../watchdog/index.js';
import {
  ATTR_HEALTH_COMPONENT,
  ATTR_HEALTH_PROBE,
  ATTR_HEALTH_STATE,
  METRIC_EVENT_LOOP_DELAY_MAX,
  METRIC_EVENT_LOOP_DELAY_P99,
  METRIC_HEALTH_COMPONENTS,
  METRIC_HEALTH_STATUS,
  METRIC_HEALTH_TICK_LAG,
  METRIC_HEALTH_VERDICTS,
  METRIC_PROCESS_CPU_STARVED,
  SCOPE_NAME,
} from '../semconv/index.js';

// A record, so the compiler checks it names every probe a component can answer to.
const PROBES: Readonly<Record<ProbeKind, true>> = { liveness: true, readiness: true, startup: true };
const COMPONENT_PROBES = Object.keys(PROBES);
const STATES = ['healthy', 'unhealthy'];

/** Options of {@link installHealthMetrics}. */
export interface HealthMetricsOptions {
  /** Where the instruments are made; default the global meter provider (NodeSDK's, when `OTEL_METRICS_EXPORTER` is set). */
  meterProvider?: MeterProvider;
  /**
   * Components reported one by one (status, tick lag, verdicts), in registration order; the rest
   * are only counted in `lifeline.health.components`. It bounds the series a catalog can make. Default 100.
   */
  maxComponents?: number;
}

/**
 * Reports a catalog as OpenTelemetry metrics, read at each collection (nothing runs between):
 * - `lifeline.health.status` (gauge, 1 healthy / 0 unhealthy), `lifeline.health.tick.lag` (gauge,
 *   s: how long the oldest tick waited to be taken) and `lifeline.health.verdicts` (counter: times
 *   the component turned unhealthy), per component (`lifeline.health.component`,
 *   `lifeline.health.probe`), for the first `maxComponents` (a component gone or past the cap keeps
 *   its last value in the SDK's memory: count on `lifeline.health.components` for alerts on all);
 * - `lifeline.health.components` (gauge): components by probe and `lifeline.health.state`, all of them;
 * - `lifeline.event_loop.delay.p99` and `.max` (gauges, s) since the previous collection;
 * - `lifeline.process.cpu_starved` (counter, s): how long the event loop stalled (each time for at
 *   least the watchdog's threshold) because the process got no CPU — stopped, a paused VM, throttled
 *   at its CPU limit — which the watchdog tells from a blocked loop and does not report as one.
 * `startLifeline` and register mode install it; the SDK exports it when `OTEL_METRICS_EXPORTER` is set.
 * Not a process-wide change but a reporter: each install reports its catalog until its own
 * `uninstall` (the instruments stay, silent).
 * @example
 * ```ts
 * const installed = installHealthMetrics(health, { meterProvider });
 * // on shutdown: installed.uninstall();
 * ```
 */
export function installHealthMetrics(health: HealthCatalog, options: HealthMetricsOptions = {}): Installed {
  const { maxComponents = 100 } = options;
  numberOption('maxComponents', maxComponents, { min: 0, max: 100_000, integer: true });
  const meter = (options.meterProvider ?? metrics).getMeter(SCOPE_NAME);
  const status = meter.createObservableGauge(METRIC_HEALTH_STATUS, {
    unit: '1',
    description: 'Whether the component passed its last ping round: 1 healthy, 0 unhealthy',
  });
  const lag = meter.createObservableGauge(METRIC_HEALTH_TICK_LAG, {
    unit: 's',
    description: 'How long the component’s oldest tick has waited to be taken (0: none waits)',
  });
  const verdicts = meter.createObservableCounter(METRIC_HEALTH_VERDICTS, {
    unit: '{verdict}',
    description: 'Times the component turned unhealthy',
  });
  const components = meter.createObservableGauge(METRIC_HEALTH_COMPONENTS, {
    unit: '{component}',
    description: 'Registered components by probe and state',
  });
  const delayP99 = meter.createObservableGauge(METRIC_EVENT_LOOP_DELAY_P99, {
    unit: 's',
    description: 'Event-loop delay, 99th percentile since the previous collection',
  });
  const delayMax = meter.createObservableGauge(METRIC_EVENT_LOOP_DELAY_MAX, {
    unit: 's',
    description: 'Event-loop delay, the longest since the previous collection',
  });
  const starved = meter.createObservableCounter(METRIC_PROCESS_CPU_STARVED, {
    unit: 's',
    description: 'How long the event loop stalled because the process got no CPU (stopped, throttled at its CPU limit), not blocked',
  });
  const loop = new ProcessView();
  loop.start();
  const observables: Observable[] = [status, lag, verdicts, components, delayP99, delayMax, starved];
  const observe = (result: BatchObservableResult): void => {
    // Every probe and state, 0 included: the SDK repeats the last value of a series not observed again.
    const counts = new Map<string, number>();
    for (const probe of COMPONENT_PROBES) for (const state of STATES) counts.set(`${probe}\n${state}`, 0);
    let reported = 0;
    for (const component of health.report()) {
      const state = component.healthy ? 'healthy' : 'unhealthy';
      const key = `${component.probe}\n${state}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      if (reported++ >= maxComponents) continue;
      const attributes = { [ATTR_HEALTH_COMPONENT]: component.name, [ATTR_HEALTH_PROBE]: component.probe };
      result.observe(status, component.healthy ? 1 : 0, attributes);
      result.observe(lag, component.lagMs / 1_000, attributes);
      result.observe(verdicts, component.verdicts, attributes);
    }
    for (const [key, count] of counts) {
      const [probe, state] = key.split('\n');
      result.observe(components, count, { [ATTR_HEALTH_PROBE]: probe, [ATTR_HEALTH_STATE]: state });
    }
    const delay = loop.eventLoopDelayMs();
    loop.resetDelay();
    result.observe(delayP99, delay.p99 / 1_000);
    result.observe(delayMax, delay.max / 1_000);
    result.observe(starved, cpuStarvation().seconds);
  };
  meter.addBatchObservableCallback(observe, observables);
  return installed(() => {
    meter.removeBatchObservableCallback(observe, observables);
    loop.stop();
  });
}
