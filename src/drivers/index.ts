export { installDriverDeadlines, type InstalledDriverDeadlines } from './install.js';
