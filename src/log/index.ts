export { defaultLogger, loggerOrDefault, type Logger } from './logger.js';
