export { LifelineError, invalidOption, oneOf, type LifelineErrorCode } from './lifeline-error.js';
