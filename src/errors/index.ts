export {
  allows,
  expectation,
  LifelineError,
  MAX_TIMER_MS,
  errorText,
  invalidOption,
  numberOption,
  oneOf,
  type LifelineErrorCode,
  type NumberRule,
} from './lifeline-error.js';
