export { batchProcessorFromEnv, batchTuningFromEnv, traceExportersFromEnv } from './exporters-from-env.js';
export { ExportWarningExporter, otlpDestination } from './export-warning.js';
export { EXIT_FLUSH_BUDGET_MS, flushAtExit, RetryingExporter, spanBytes, type RetryOptions } from './retrying-exporter.js';
