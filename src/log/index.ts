export { defaultLogger, type Logger } from './logger.js';
