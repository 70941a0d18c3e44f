export { batchProcessorFromEnv, batchTuningFromEnv, traceExportersFromEnv } from './exporters-from-env.js';
export { ExportWarningExporter, otlpDestination } from './export-warning.js';
export { RetryingExporter, spanBytes, type RetryOptions } from './retrying-exporter.js';
