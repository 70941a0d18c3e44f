export { LifelineError, invalidOption, type LifelineErrorCode } from './lifeline-error.js';
