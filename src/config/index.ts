export {
  DEFAULT_HEADERS_TIMEOUT_MS,
  envInteger,
  healthIntervalFromEnv,
  readEnvConfig,
  type EnvConfig,
  type EnvInteger,
} from './env-config.js';
export { MINIMUM_NODE, unsupportedNode } from './node-version.js';
