import { metrics, type BatchObservableResult, type MeterProvider } from '@opentelemetry/api';
import type { Diagnostics } from '../diagnostics/index.js';
import { ATTR_IN_FLIGHT_KIND, ATTR_IN_FLIGHT_OPERATION, METRIC_IN_FLIGHT_STUCK, SCOPE_NAME } from '../semconv/index.js';

/**
 * Reports `lifeline.in_flight.stuck` (gauge, `{span}`): the spans the last stuck-work round found
 * stuck, by `lifeline.in_flight.kind` and `lifeline.in_flight.operation` — an alert on it fires
 * while requests hang, in a service that registered no component too. A series whose work is no
 * longer stuck reports 0 (the SDK would otherwise repeat its last value). Returns the way back.
 */
export function installStuckMetrics(diagnostics: Diagnostics, options: { meterProvider?: MeterProvider } = {}): { uninstall(): void } {
  const meter = (options.meterProvider ?? metrics).getMeter(SCOPE_NAME);
  const stuck = meter.createObservableGauge(METRIC_IN_FLIGHT_STUCK, {
    unit: '{span}',
    description: 'Spans stuck in flight (past their deadline, or with none for stuckAfterMs) at the last stuck-work round',
  });
  /** Every series reported once: observed as 0 while nothing of it is stuck. */
  const seen = new Set<string>();
  const observe = (result: BatchObservableResult): void => {
    const counts = diagnostics.stuckCounts;
    for (const key of counts.keys()) seen.add(key);
    for (const key of seen) {
      const [kind, operation] = key.split('\n');
      result.observe(stuck, counts.get(key) ?? 0, { [ATTR_IN_FLIGHT_KIND]: kind, [ATTR_IN_FLIGHT_OPERATION]: operation });
    }
  };
  meter.addBatchObservableCallback(observe, [stuck]);
  let installed = true;
  return {
    uninstall() {
      if (!installed) return;
      installed = false;
      meter.removeBatchObservableCallback(observe, [stuck]);
    },
  };
}
