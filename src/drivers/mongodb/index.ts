export { installMongoDeadlines, type InstalledMongoDeadlines } from './mongodb-deadlines.js';
