import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { endsTransaction, operationOf } from '../../src/drivers/sql.js';

/** What the drivers read from a statement's text: the operation a rule matches, and whether it ends a transaction (no deadline then). */
describe('SQL statements', () => {
  it('ROLLBACK and ABORT end a transaction, in any case, after white space, to a savepoint too', () => {
    for (const text of [
      'ROLLBACK',
      'rollback',
      '  ROLLBACK TO SAVEPOINT s1',
      '\n\tAbort',
      '\r\nROLLBACK;',
      'ABORT',
      '\uFEFFROLLBACK',
      '\u00A0abort',
    ])
      expect(endsTransaction(text)).toBe(true);
  });

  it('anything else does not: other statements, words that only begin alike, no text', () => {
    for (const text of ['SELECT 1', 'ROLLBACKS', 'abortive', 'COMMIT', 'INSERT INTO t VALUES (1)', '', '(ROLLBACK)', 'R', undefined, 42])
      expect(endsTransaction(text)).toBe(false);
  });

  it('answers as the expression alone would, for any text (the first-character check only skips it)', () => {
    const start = fc.constantFrom('', ' ', '\t', '\n', '\uFEFF', '\u00A0', '\u2028', 'r', 'R', 'a', 'A', '(', 'ſ', 'K');
    const word = fc.constantFrom('', 'ROLLBACK', 'rollback', 'ABORT', 'Abort', 'ROLLBACKS', 'SELECT');
    fc.assert(
      fc.property(start, word, fc.string(), (first, middle, rest) => {
        const text = first + middle + rest;
        expect(endsTransaction(text)).toBe(/^\s*(?:ROLLBACK|ABORT)\b/i.test(text));
      }),
    );
  });

  it('the operation is the first word, upper case', () => {
    expect(operationOf('  select * from t')).toBe('SELECT');
    expect(operationOf('WITH s AS (SELECT 1) SELECT * FROM s')).toBe('WITH');
    expect(operationOf(7)).toBeUndefined();
  });
});
