export { installPgDeadlines } from './pg-deadlines.js';
