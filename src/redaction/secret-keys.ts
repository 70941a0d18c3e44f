import { Memo } from '../memo/index.js';
import { percentDecoded } from './patterns.js';

// Which keys name a secret: the grammar of key segments and the words, as `RedactionOptions.queryKeys`
// describes it. A key is a query or path parameter, a header, a JSON or `key=value` name.

/**
 * A key's last segment that makes it about a secret, not the secret: a measure or a kind
 * (`token_count`, `token_type`), a time (`password_changed_at`), a way or a place (`auth_method`,
 * `private_ip`, `token_url`), a flag (`password_required`), a name (`secret_name`).
 */
const ABOUT_WORDS: ReadonlySet<string> = new Set(
  'count length size type limit total max min ttl expiry at time date timestamp expires expired changed updated created method mode scheme provider ip address host port url uri endpoint enabled disabled required policy strength version format algorithm alg name'.split(
    ' ',
  ),
);
/**
 * Words common in names of other things (`auth_method`, `private_ip`, `session_timeout`, `key_id`):
 * they make a key secret only as its last segment (`ssh_key`, `x-auth`), or written together with
 * another into a listed word (`apikey`, `sessionid`).
 */
const WEAK_WORDS: ReadonlySet<string> = new Set(['key', 'auth', 'private', 'session']);
/** Words under which digits are a count, a port or an id rather than a secret (`tokens:512`, `session:6379`, `key:7`). */
const NOT_NUMERIC_SECRETS: ReadonlySet<string> = new Set([
  ...WEAK_WORDS,
  'tokens',
  'secrets',
  'passwords',
  'credentials',
  'sid',
  'sig',
  'signature',
  'cookie',
]);
/** What a key names: no secret, a secret in text, or a secret even when its value is digits. */
export const NOT_SECRET = 0;
export const SECRET_TEXT = 1;
export const SECRET_ANY = 2;
export type KeyVerdict = typeof NOT_SECRET | typeof SECRET_TEXT | typeof SECRET_ANY;
/** Boundaries inside a key: camelCase humps (`apiKey`, `APIKey`) and letter/digit changes (`sig0`). */
const KEY_HUMPS = /(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])/g;
const NOT_ALPHANUMERIC = /[^a-z0-9]+/;

/** The secret words of one redactor, and the verdicts on keys they gave. */
export class SecretKeys {
  readonly #words: ReadonlySet<string>;
  /** The longest word, so a run of joined segments stops growing once it cannot match. */
  readonly #longestWord: number;
  /** Verdicts per key: the same few keys recur on every span. */
  readonly #verdicts = new Memo<KeyVerdict>(1_024, 64);
  /** A secret word right before `:` and a digit (`pin:4821`): text holding one is scanned though it has nothing else `MAY_HOLD_SECRET` needs. */
  readonly wordBeforeDigits: RegExp;

  /** @param queryKeys - the words, as `RedactionOptions.queryKeys` has them. */
  constructor(queryKeys: readonly string[]) {
    const words = queryKeys.map((word) => word.toLowerCase().replace(/[^a-z0-9]+/g, '')).filter((word) => word !== '');
    this.#words = new Set(words);
    this.#longestWord = Math.max(0, ...words.map((word) => word.length));
    // The colon first: the engine looks for it, and tries the words only there.
    this.wordBeforeDigits = words.length === 0 ? /$^/ : new RegExp(`:(?<=(?:${[...this.#words].join('|')}):)\\d`, 'i');
  }

  /** Whether `key` names a secret, and whether digits under it are one. */
  verdict(key: string): KeyVerdict {
    return this.#verdicts.get(key, this.#namesSecret);
  }

  /** Whether `key` names a secret. */
  isSecret(key: string): boolean {
    return this.#verdicts.get(key, this.#namesSecret) !== NOT_SECRET;
  }

  // A field, not a method: `Memo.get` takes it as it is, with no closure made per call.
  readonly #namesSecret = (key: string): KeyVerdict => {
    const decoded = percentDecoded(key);
    const segments = decoded.replace(KEY_HUMPS, ' ').toLowerCase().split(NOT_ALPHANUMERIC);
    // The last segment that is a word: `key_1` and `session-v2` end in `key` and `session`.
    const end = segments.findLastIndex((segment) => /[a-z]{2}/.test(segment));
    if (end === -1 || ABOUT_WORDS.has(segments[end] ?? '')) return NOT_SECRET;
    let verdict: KeyVerdict = NOT_SECRET;
    // A segment, or adjacent segments written together (`api_key` for the word `apikey`); a run
    // stops at the longest word, so the cost stays linear in the key.
    for (let first = 0; first <= end; first++) {
      let joined = '';
      for (let last = first; last <= end && joined.length <= this.#longestWord; last++) {
        joined += segments[last] ?? '';
        if (!this.#words.has(joined) || (last !== end && WEAK_WORDS.has(joined))) continue;
        if (last === end && !NOT_NUMERIC_SECRETS.has(joined)) return SECRET_ANY;
        verdict = SECRET_TEXT;
      }
    }
    return verdict;
  };
}
