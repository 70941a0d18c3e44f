/**
 * Resolves once the current turn of the event loop is over and the next one has run its
 * immediates: a deadline stops its shared timer at the end of the turn its last call ended in, and
 * Node reports a cleared timer to async hooks (`destroy`) on the turn after.
 */
export async function afterThisTurn(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
}
