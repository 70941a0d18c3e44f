/** What counts as a secret. Matching is case-insensitive; entries are substrings of a key. */
export interface RedactionOptions {
  /** Query parameter keys whose values are replaced. Default: token, key, secret, password, passwd, pwd, signature, sig, auth, credential, session, code. */
  queryKeys?: readonly string[];
  /** Header names whose values are replaced (in `http.*.header.*` attributes). Default: authorization, proxy-authorization, cookie, set-cookie, x-api-key. */
  headers?: readonly string[];
}

export const REDACTED = 'REDACTED';
const DEFAULT_QUERY_KEYS = ['token', 'key', 'secret', 'password', 'passwd', 'pwd', 'signature', 'sig', 'auth', 'credential', 'session', 'code'];
const DEFAULT_HEADERS = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key'];
const CREDENTIAL = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/i;
const CREDENTIAL_GLOBAL = new RegExp(CREDENTIAL.source, 'gi');
const MAX_TEXT = 65_536;
/**
 * `key=value` or `key: value` pairs (the key is checked in the callback). One match start per run
 * of key characters and bounded lengths: no backtracking blow-up on long hostile input. `name:
 * value` needs the space, so a stack frame's `file.js:12:3` is not a pair.
 */
const PAIR = /(?<![\w.-])([\w.-]{1,128})(\s*=\s*|:\s+)([^\s&;,"']{1,4096})/g;
const URL_KEYS = new Set(['url.full', 'http.url', 'url.original', 'http.target', 'url.path']);
// A scheme of at most 32 characters: an unbounded one backtracks quadratically over long text.
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]{0,31}:\/\/[^\s"'<>]+/gi;

/** Redacts secrets from URLs, attribute values and free text. */
export class Redactor {
  readonly #queryKeys: readonly string[];
  readonly #headers: readonly string[];

  constructor(options: RedactionOptions = {}) {
    this.#queryKeys = (options.queryKeys ?? DEFAULT_QUERY_KEYS).map((k) => k.toLowerCase());
    this.#headers = (options.headers ?? DEFAULT_HEADERS).map((h) => h.toLowerCase());
  }

  /** A URL (absolute, or a path with a query) without userinfo and with sensitive query values replaced. */
  url(text: string): string {
    let url: URL;
    let relative = false;
    try {
      url = new URL(text);
    } catch {
      try {
        url = new URL(text, 'http://relative.invalid');
        relative = true;
      } catch {
        return text;
      }
    }
    let changed = false;
    if (url.username !== '' || url.password !== '') {
      url.username = '';
      url.password = '';
      changed = true;
    }
    for (const key of new Set(url.searchParams.keys())) {
      if (this.#sensitiveKey(key)) {
        url.searchParams.set(key, REDACTED);
        changed = true;
      }
    }
    // OAuth implicit flows put tokens in the fragment: #access_token=…
    if (url.hash.includes('=')) {
      const fragment = this.query(url.hash.slice(1));
      if (fragment !== url.hash.slice(1)) {
        url.hash = fragment;
        changed = true;
      }
    }
    if (!changed) return text;
    return relative ? `${url.pathname}${url.search}${url.hash}` : url.toString();
  }

  /** A query string (`?a=b&token=…`) with sensitive values replaced. */
  query(text: string): string {
    const params = new URLSearchParams(text.startsWith('?') ? text.slice(1) : text);
    let changed = false;
    for (const key of new Set(params.keys())) {
      if (this.#sensitiveKey(key)) {
        params.set(key, REDACTED);
        changed = true;
      }
    }
    if (!changed) return text;
    return `${text.startsWith('?') ? '?' : ''}${params.toString()}`;
  }

  /** The redacted value of an attribute, or `undefined` when it needs no change. */
  attribute(key: string, value: unknown): unknown {
    // Runs on every attribute of every span: cheap checks first, parsing only when a secret may be there.
    if (key.startsWith('http.request.header.') || key.startsWith('http.response.header.')) {
      const header = key.slice(key.indexOf('.header.') + 8).toLowerCase().replace(/_/g, '-');
      // Listed headers, and any header named like a secret (x-auth-token, x-goog-api-key, …).
      const secret = this.#headers.includes(header) || this.#sensitiveKey(header);
      return secret ? (Array.isArray(value) ? value.map(() => REDACTED) : REDACTED) : undefined;
    }
    if (typeof value !== 'string') return undefined;
    if (URL_KEYS.has(key)) return value.includes('@') || this.#mayHoldSecretQuery(value) ? changedOrUndefined(value, this.url(value)) : undefined;
    if (key === 'url.query') return this.#mayHoldSecretQuery(value) ? changedOrUndefined(value, this.query(value)) : undefined;
    if (value.includes('://')) return changedOrUndefined(value, this.text(value));
    return undefined;
  }

  /**
   * Free text (error messages, stacks, names) with secrets redacted: every URL in it, `key=value`
   * and `key: value` pairs of sensitive keys, and `Bearer`/`Basic` credentials.
   */
  text(value: string): string {
    // Dumps cap their attributes anyway: a bounded input keeps every regex below linear in practice.
    if (value.length > MAX_TEXT) value = value.slice(0, MAX_TEXT);
    if (!value.includes('://') && !this.#mayHoldSecretQuery(value) && !CREDENTIAL.test(value)) return value;
    const withoutUrls = value.includes('://') ? value.replace(URL_IN_TEXT, (url) => this.url(url)) : value;
    const withoutUrlsAndCredentials = withoutUrls.replace(CREDENTIAL_GLOBAL, (_match, scheme: string) => `${scheme} ${REDACTED}`);
    return this.#redactPairs(withoutUrlsAndCredentials);
  }

  /** Redacts the value of every `key=value` / `key: value` pair whose key names a secret. */
  #redactPairs(text: string): string {
    const pair = new RegExp(PAIR.source, 'g');
    let result = '';
    let copied = 0;
    for (let match = pair.exec(text); match !== null; match = pair.exec(text)) {
      const [, key = '', separator = '', secret = ''] = match;
      const valueStart = match.index + key.length + separator.length;
      if (this.#sensitiveKey(key) && secret !== REDACTED && !/^(bearer|basic)$/i.test(secret)) {
        result += `${text.slice(copied, valueStart)}${REDACTED}`;
        copied = valueStart + secret.length;
      } else {
        pair.lastIndex = valueStart; // the value may itself start a pair: "failed: password=…"
      }
    }
    return result + text.slice(copied);
  }

  /** A cheap pre-check: text that names no sensitive key needs no parsing. */
  #mayHoldSecretQuery(value: string): boolean {
    const lower = value.toLowerCase();
    return this.#queryKeys.some((k) => lower.includes(k));
  }

  #sensitiveKey(key: string): boolean {
    const lower = key.toLowerCase();
    return this.#queryKeys.some((k) => lower === k || lower.includes(k));
  }
}

function changedOrUndefined(before: string, after: string): string | undefined {
  return after === before ? undefined : after;
}
