export { DeadlineSpanProcessor } from './deadline-span-processor.js';
