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
  return typeof text === 'string' && /^\s*(?:ROLLBACK|ABORT)\b/i.test(text);
}
