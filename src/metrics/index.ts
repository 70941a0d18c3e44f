export { DeadlineMetricsSpanProcessor, type DeadlineMetricsOptions } from './deadline-metrics.js';
export { installHealthMetrics, type HealthMetricsOptions } from './health-metrics.js';
export { installStuckMetrics } from './stuck-metrics.js';
