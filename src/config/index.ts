export { healthIntervalFromEnv, readEnvConfig, type EnvConfig } from './env-config.js';
