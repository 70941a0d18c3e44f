export { DEFAULT_SECRET_WORDS, Redactor, type RedactionOptions } from './redactor.js';
export { REDACTED } from './patterns.js';
export { RedactionSpanProcessor } from './redaction-span-processor.js';
