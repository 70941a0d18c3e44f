export { defaultLogger, loggerOrDefault, logSwallowed, type Logger } from './logger.js';
