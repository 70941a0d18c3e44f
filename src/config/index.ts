export { DEFAULT_HEADERS_TIMEOUT_MS, healthIntervalFromEnv, readEnvConfig, type EnvConfig } from './env-config.js';
export { MINIMUM_NODE, unsupportedNode } from './node-version.js';
