/**
 * Answers remembered per key, for hot paths that ask the same few questions over and over (which
 * peer, which host, which attribute key). Bounded in count and in key length; cleared rather than
 * evicted one by one when full, so a flood of distinct keys costs only a refill, never memory.
 * Answers are never `undefined` (that is how a key not yet decided reads).
 */
export class Memo<V extends boolean | number | string | object> {
  readonly #answers = new Map<string, V>();
  readonly #maxKeys: number;
  readonly #maxKeyLength: number;

  constructor(maxKeys: number, maxKeyLength: number) {
    this.#maxKeys = maxKeys;
    this.#maxKeyLength = maxKeyLength;
  }

  /** The answer for `key`: remembered, or `decide(key)` (remembered when the key is short enough). */
  get(key: string, decide: (key: string) => V): V {
    const known = this.#answers.get(key);
    if (known !== undefined) return known;
    const answer = decide(key);
    if (key.length <= this.#maxKeyLength) {
      if (this.#answers.size >= this.#maxKeys) this.#answers.clear();
      this.#answers.set(key, answer);
    }
    return answer;
  }
}
