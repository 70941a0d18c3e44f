export { startLifeline, type Lifeline, type LifelineOptions } from './start-lifeline.js';
