export { readEnvConfig, type EnvConfig } from './env-config.js';
