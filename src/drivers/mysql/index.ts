export { installMysqlDeadlines } from './mysql-deadlines.js';
