import { describe, expect, it } from 'vitest';
import { percentDecoded } from '../../src/redaction/patterns.js';
import { NOT_SECRET, SECRET_ANY, SECRET_TEXT, SecretKeys } from '../../src/redaction/secret-keys.js';
import { DEFAULT_SECRET_WORDS } from '../../src/redaction/index.js';

/** The grammar's parts on their own: what Redactor's tests reach only through whole values. */
describe('percentDecoded', () => {
  it('decodes up to three levels and no more: the work per key or value stays bounded', () => {
    expect(percentDecoded('%74oken')).toBe('token');
    expect(percentDecoded('%252574oken')).toBe('token');
    expect(percentDecoded('%25252574oken')).toBe('%74oken');
    expect(percentDecoded('100%')).toBe('100%');
  });
});

describe('SecretKeys', () => {
  const keys = new SecretKeys(DEFAULT_SECRET_WORDS);

  it('tells a secret whose digits are one from a secret only in text, and from a key about a secret', () => {
    expect(keys.verdict('pin')).toBe(SECRET_ANY);
    expect(keys.verdict('refresh_token')).toBe(SECRET_ANY);
    // A count, a port, an id: digits under them are not the secret.
    expect(keys.verdict('tokens')).toBe(SECRET_TEXT);
    expect(keys.verdict('session')).toBe(SECRET_TEXT);
    expect(keys.verdict('token_count')).toBe(NOT_SECRET);
    expect(keys.verdict('session_timeout')).toBe(NOT_SECRET);
    expect(keys.verdict('tokenizer')).toBe(NOT_SECRET);
  });

  it('reads a key percent-decoded, to the same bound', () => {
    expect(keys.isSecret('%252574oken')).toBe(true);
    expect(keys.isSecret('%25252574oken')).toBe(false);
  });

  it('finds a word right before a colon and a digit, and nothing with no words', () => {
    expect(keys.wordBeforeDigits.test('retry with PIN:4821')).toBe(true);
    expect(keys.wordBeforeDigits.test('auth-service:8080')).toBe(false);
    const none = new SecretKeys(['', '--']);
    expect(none.wordBeforeDigits.test('pin:4821')).toBe(false);
    expect(none.isSecret('password')).toBe(false);
  });
});
