/** The statement's first word, as `db.operation.name` names it for SQL without a parser (`SELECT`). */
export function operationOf(text: unknown): string | undefined {
  return typeof text === 'string' ? /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase() : undefined;
}

/**
 * `ROLLBACK` / `ABORT` (to a savepoint too): what an ORM sends after a statement its deadline cut,
 * in the same expired context. Cut too, the transaction would stay open on a connection the next
 * caller borrows (PostgreSQL fails its every query with 25P02; MySQL runs them inside it), so these
 * get no deadline.
 */
export function endsTransaction(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  // Most statements are told apart by their first character, without the expression (every query asks).
  // A letter in lower case; ASCII white space stays below 0x40, and the expression decides for the rest (a BOM, U+00A0).
  const first = text.charCodeAt(0) | 0x20;
  return (first === 0x72 /* r */ || first === 0x61 /* a */ || first < 0x40 || first > 0x7f) && /^\s*(?:ROLLBACK|ABORT)\b/i.test(text);
}
