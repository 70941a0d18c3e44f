export { installDriverDeadlines } from './install.js';
