export {
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_PROBE_PORT,
  envInteger,
  healthIntervalFromEnv,
  inKubernetes,
  readEnvConfig,
  type EnvConfig,
  type EnvInteger,
} from './env-config.js';
export {
  correctedEnv,
  envCorrections,
  exporterAskedFor,
  MIN_METRIC_EXPORT_INTERVAL_MS,
  warnEnvCorrections,
  withCorrectedEnv,
  type EnvCorrection,
} from './env-warnings.js';
export { MINIMUM_NODE, unsupportedNode } from './node-version.js';
export { apiCopyFrom, appApiMismatch, type ApiCopy } from './api-version.js';
