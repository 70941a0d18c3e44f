export { installPgDeadlines, type InstalledPgDeadlines } from './pg-deadlines.js';
