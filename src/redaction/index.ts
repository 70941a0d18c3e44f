export { DEFAULT_SECRET_WORDS, REDACTED, Redactor, type RedactionOptions } from './redactor.js';
export { RedactionSpanProcessor } from './redaction-span-processor.js';
