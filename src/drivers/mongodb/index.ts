export { installMongoDeadlines } from './mongodb-deadlines.js';
