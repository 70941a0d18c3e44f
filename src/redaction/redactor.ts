import { invalidOption } from '../errors/index.js';
import { PLAIN_KEYS, SecretAttributes, URL_KEYS, hiddenByName } from './attribute-names.js';
import { REDACTED } from './patterns.js';
import { Scanner } from './scanner.js';
import { NOT_SECRET, SECRET_ANY, SecretKeys } from './secret-keys.js';

// The redactor: its options, the bound on every value, and the walk over an attribute's value.
// Beside it: patterns (the grammar of secrets in text), secret-keys (which keys name a secret),
// attribute-names (what an attribute's name says) and scanner (text, URLs and queries read once).

/** What counts as a secret, and how long a value may get. */
export interface RedactionOptions {
  /**
   * Words that make a key secret, wherever a key names a value: query and fragment parameters,
   * `;name=` path parameters, `name=value` / `name: value` / `"name":"value"` in free text (error
   * messages, span names, `db.*` statements), and header names. A key is split into segments at
   * `_ - . [ ]` (any non-alphanumeric), camelCase humps and letter/digit boundaries, after
   * percent-decoding; it is secret when one segment, or a run of adjacent segments written together,
   * equals a word (case-insensitive). So `token` matches `refresh_token`, `X-Auth-Token` and
   * `accessToken`, but not `tokenizer`; `api_key` or `apikey` matches `x-api-key` and `apiKey`.
   * A key whose last segment says it is about a secret — a measure, a kind, a time, a way, a place
   * (`token_count`, `token_type`, `password_changed_at`, `auth_method`, `private_ip`) — is no
   * secret. The weak words `key`, `auth`, `private` and `session` count only as a key's last
   * segment (`ssh_key`, `x-auth`) or in a compound written as one word (`api_key`, `session_id`):
   * `session_timeout` is a duration. An attribute whose name (after its last `.`: `db.password`,
   * `app.auth_token`, `app.apiKey`) is a secret key has its string values replaced whole, and its
   * numbers when its last word is no count nor weak word (`app.pin`, not `app.tokens`); a bare
   * `….key` (`cache.key`) is the namespace's key, a name, and is read as text. After a colon
   * without a space, digits are a port or a line (`auth-service:8080`, `token.js:12:3`) unless
   * the key ends in such a word (`pin:4821`, `token:123456`).
   * Default {@link otel-lifeline-sdk#DEFAULT_SECRET_WORDS}; extend it rather than replace it:
   * `queryKeys: [...DEFAULT_SECRET_WORDS, 'tenant']`.
   */
  queryKeys?: readonly string[];
  /** Header names whose values are always replaced (in `http.*.header.*` attributes), besides those named by a secret word. Default: authorization, proxy-authorization, cookie, set-cookie, x-api-key. */
  headers?: readonly string[];
  /**
   * Longest string attribute value, status message or span name kept, in UTF-16 code units; a
   * longer one is cut and ends with `…[truncated from N chars]`. It bounds what one hostile request
   * (a 1 MB URL) costs to redact and to export. Default 16 384; `Infinity` keeps every value whole
   * (redaction stays linear in the input).
   */
  maxValueLength?: number;
}

/**
 * Words that name a secret (matched against key segments, see {@link otel-lifeline#RedactionOptions.queryKeys}).
 * Compounds written as one word (`accesstoken`, `jsessionid`) are listed since they form one
 * segment. Not `code`: as a segment it would hide `country_code` and `zip_code`, and an OAuth code
 * is single-use; add it if your callbacks carry one.
 */
export const DEFAULT_SECRET_WORDS: readonly string[] = [
  'token',
  'tokens',
  'accesstoken',
  'refreshtoken',
  'idtoken',
  'authtoken',
  'csrftoken',
  'xsrftoken',
  'jwt',
  'bearer',
  'secret',
  'secrets',
  'clientsecret',
  'password',
  'passwords',
  'passwd',
  'pwd',
  'passphrase',
  'passcode',
  'pin',
  'otp',
  'totp',
  'key',
  'apikey',
  'accesskey',
  'secretkey',
  'privatekey',
  'private',
  'auth',
  'authorization',
  'credential',
  'credentials',
  'signature',
  'sig',
  'session',
  'sessionid',
  'sessid',
  'sid',
  'jsessionid',
  'phpsessid',
  'cookie',
];
const DEFAULT_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key'];
const DEFAULT_MAX_VALUE_LENGTH = 16_384;

/** Clean values remembered at most per kind, and the longest remembered (see `Redactor.#clean`). */
const MAX_CLEAN_VALUES = 1_024;
const MAX_CLEAN_LENGTH = 512;
/** How a value is read (a constant, not a closure: this runs for every attribute of every span). */
const TEXT_VALUE = 0;
const URL_VALUE = 1;
const QUERY_VALUE = 2;
type ValueKind = typeof TEXT_VALUE | typeof URL_VALUE | typeof QUERY_VALUE;

/** Redacts secrets from URLs, attribute values and free text, in time linear in their length. */
export class Redactor {
  readonly #keys: SecretKeys;
  readonly #attributes: SecretAttributes;
  readonly #scanner: Scanner;
  readonly #maxValueLength: number;
  /**
   * Values redaction left unchanged, per kind (text, URL, query): a service records the same few
   * URLs, routes and user agents on span after span, and scanning them again finds nothing again.
   * Only what spans carry out as it is gets remembered (never a value that needed redacting), up
   * to 1,024 values of at most 512 characters per kind, for as long as the process lives or until
   * a set fills and is cleared.
   */
  readonly #clean: readonly [Set<string>, Set<string>, Set<string>] = [new Set(), new Set(), new Set()];

  constructor(options: RedactionOptions = {}) {
    this.#keys = new SecretKeys(options.queryKeys ?? DEFAULT_SECRET_WORDS);
    this.#attributes = new SecretAttributes(
      this.#keys,
      (options.headers ?? DEFAULT_HEADERS).map((h) => h.toLowerCase()),
    );
    this.#scanner = new Scanner(this.#keys);
    const { maxValueLength = DEFAULT_MAX_VALUE_LENGTH } = options;
    if (
      typeof maxValueLength !== 'number' ||
      !(maxValueLength === Infinity || (Number.isInteger(maxValueLength) && maxValueLength >= 64))
    ) {
      throw invalidOption('redact.maxValueLength', maxValueLength, 'an integer >= 64, or Infinity');
    }
    this.#maxValueLength = maxValueLength;
  }

  /** Whether a key (query or path parameter, header, JSON or `key=value` name) names a secret. */
  isSecretKey(key: string): boolean {
    return this.#keys.isSecret(key);
  }

  /** A URL (absolute, or a path with a query) without userinfo, with secret path, query and fragment parameters and JWTs replaced. */
  url(text: string): string {
    return this.#capped(text, URL_VALUE);
  }

  /** A query string (`?a=b&token=…`) with secret values replaced; everything else is kept byte for byte. */
  query(text: string): string {
    return this.#capped(text, QUERY_VALUE);
  }

  /**
   * Free text (error messages, stacks, span names, statements) with secrets redacted, in one pass:
   * every URL in it, `Authorization` credentials of any scheme, `Bearer`/`Basic` credentials,
   * JWTs, and the values of secret keys in `key=value`, `key: value`, `"key":"value"` and
   * `key 'value'` forms.
   */
  text(value: string): string {
    return this.#capped(value, TEXT_VALUE);
  }

  /** The redacted value of an attribute, or `undefined` when it needs no change. */
  attribute(key: string, value: unknown): unknown {
    // Most values of a span are numbers and booleans: nothing to read, and a secret only as a
    // number under a name digits can be (`app.pin`; not a count, `gen_ai.usage.input_tokens`).
    if (typeof value !== 'string' && !Array.isArray(value)) {
      return typeof value === 'number' && this.#attributes.verdict(key) === SECRET_ANY ? REDACTED : undefined;
    }
    // Checked before the plain keys are skipped: a name given as a secret word is never skipped.
    const verdict = this.#attributes.verdict(key);
    if (verdict !== NOT_SECRET) return hiddenByName(value, verdict);
    // Any other header's value is text like any attribute's (a Location or Referer URL with a token).
    if (PLAIN_KEYS.has(key) && !(typeof value === 'string' && value.length > this.#maxValueLength)) return undefined;
    if (typeof value === 'string') return changedOrUndefined(value, this.#value(key, value));
    return this.#items(key, value);
  }

  // Apart from `attribute`, as every function with a closure: a closure there made every call,
  // a number's too, allocate the variables it captures (~64 bytes, on every attribute of every span).
  #items(key: string, value: readonly unknown[]): unknown[] | undefined {
    if (!value.some((item) => typeof item === 'string')) return undefined;
    const redacted = value.map((item: unknown) => (typeof item === 'string' ? this.#value(key, item) : item));
    return redacted.some((item, i) => item !== value[i]) ? redacted : undefined;
  }

  /** One string attribute value: URLs parsed as URLs, a query as a query, everything else as free text. */
  #value(key: string, value: string): string {
    return this.#capped(value, URL_KEYS.has(key) ? URL_VALUE : key === 'url.query' ? QUERY_VALUE : TEXT_VALUE);
  }

  /**
   * The one place values are bounded: the input is cut to the cap before it is scanned (bounding
   * the work), and the result after (`REDACTED` is longer than a short secret, so redaction can
   * grow a value), with a marker giving the original length.
   */
  #capped(value: string, kind: ValueKind): string {
    const clean = this.#clean[kind];
    if (clean.has(value)) return value;
    const max = this.#maxValueLength;
    const redacted = this.#redact(value.length > max ? cut(value, max) : value, kind);
    if (value.length <= max && redacted.length <= max) {
      if (redacted === value && value.length <= MAX_CLEAN_LENGTH) {
        if (clean.size >= MAX_CLEAN_VALUES) clean.clear();
        clean.add(value);
      }
      return redacted;
    }
    return `${cut(redacted, max)}…[truncated from ${value.length} chars]`;
  }

  #redact(value: string, kind: ValueKind): string {
    return kind === TEXT_VALUE ? this.#scanner.text(value) : kind === URL_VALUE ? this.#scanner.url(value) : this.#scanner.query(value);
  }
}

/** The first `length` UTF-16 units of `text`, never ending in half a surrogate pair. */
function cut(text: string, length: number): string {
  if (text.length <= length) return text;
  const last = text.charCodeAt(length - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? length - 1 : length);
}

function changedOrUndefined(before: string, after: string): string | undefined {
  return after === before ? undefined : after;
}
