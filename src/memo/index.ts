export { Memo } from './memo.js';
