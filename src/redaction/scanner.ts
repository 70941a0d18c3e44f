import {
  AUTH_SCHEMES,
  CDATA_START,
  ENCODED_SEPARATOR,
  IDENTIFIED_BY,
  JWT,
  LINE_AND_COLUMN,
  MAY_HOLD_SECRET,
  NOT_UNRESERVED,
  PAIR_VALUE,
  PATH_PARAM,
  PEM_END,
  PEM_VALUE,
  QUERY_SEPARATOR,
  REDACTED,
  SCANNER,
  URL_MAY_HOLD_SECRET,
  encodeByte,
  looksLikeHost,
  percentDecoded,
  quoted,
} from './patterns.js';
import { SECRET_ANY, type SecretKeys } from './secret-keys.js';

// The scanner: free text, URLs and queries read once, left to right, with what `patterns` matches
// replaced. The three call each other (a URL in text, a query in a URL, encoded text in a query's
// value), so they are one room. Values come here already cut to the redactor's cap.

/** Reads text, URLs and queries for one redactor's secret words; uncapped (`Redactor` caps). */
export class Scanner {
  readonly #keys: SecretKeys;
  /** Set while an encoded value is read decoded, so what it holds is decoded once, not once per level. */
  #decoding = false;

  constructor(keys: SecretKeys) {
    this.#keys = keys;
  }

  /** A URL without userinfo, with secret path, query and fragment parameters and JWTs replaced. */
  url(text: string): string {
    // Nothing a secret could sit in: no query, fragment, userinfo, path parameter or JWT.
    if (!URL_MAY_HOLD_SECRET.test(text)) return text;
    // Split by hand (one indexOf each): `new URL` re-serialises, and fails on what it cannot parse.
    const queryAt = text.indexOf('?');
    const hashAt = text.indexOf('#', queryAt === -1 ? 0 : queryAt);
    const pathEnd = queryAt !== -1 ? queryAt : hashAt !== -1 ? hashAt : text.length;
    let head = text.slice(0, pathEnd);
    const schemeEnd = head.indexOf('://');
    if (schemeEnd !== -1 && schemeEnd <= 32) {
      const authorityStart = schemeEnd + 3;
      const slash = head.indexOf('/', authorityStart);
      const authorityEnd = slash === -1 ? head.length : slash;
      const at = head.lastIndexOf('@', authorityEnd - 1);
      if (at >= authorityStart) head = head.slice(0, authorityStart) + head.slice(at + 1);
    }
    if (head.includes(';'))
      head = head.replace(PATH_PARAM, (param: string, name: string) => (this.#keys.isSecret(name) ? `;${name}=${REDACTED}` : param));
    if (head.includes('eyJ')) head = head.replace(JWT, REDACTED);
    const query = queryAt === -1 ? '' : `?${this.query(text.slice(queryAt + 1, hashAt === -1 ? text.length : hashAt))}`;
    // OAuth implicit flows put tokens in the fragment: #access_token=…
    const fragment = hashAt === -1 ? '' : `#${this.query(text.slice(hashAt + 1))}`;
    return `${head}${query}${fragment}`;
  }

  /** One pass over `a=b&c=d;e=f`: each key is checked once, each value kept or replaced once. */
  query(text: string): string {
    const mark = text.startsWith('?') ? '?' : '';
    if (!text.includes('=')) return text;
    const query = mark === '' ? text : text.slice(1);
    // Split by a regex only when there is a `;`: the plain split is most of a long query's cost.
    const semicolons = query.includes(';');
    const parts = semicolons ? query.split(QUERY_SEPARATOR) : query.split('&');
    for (let i = 0; i < parts.length; i += semicolons ? 2 : 1) {
      const part = parts[i] ?? '';
      const eq = part.indexOf('=');
      if (eq === -1) continue;
      if (this.#keys.isSecret(part.slice(0, eq))) parts[i] = `${part.slice(0, eq + 1)}${REDACTED}`;
      else if (part.includes('eyJ', eq)) parts[i] = part.replace(JWT, REDACTED);
      else if (!this.#decoding && ENCODED_SEPARATOR.test(part)) parts[i] = `${part.slice(0, eq + 1)}${this.#encoded(part.slice(eq + 1))}`;
    }
    return mark + parts.join(semicolons ? '' : '&');
  }

  /**
   * A parameter's value that is percent-encoded text (a server instrumentation records
   * `?a=1;token=…` as `a=1%3Btoken%3D…`; a redirect carries `next=%2Fcb%3Ftoken%3D…`): read
   * decoded as text, and encoded again only when that hid something. Decoded once, whatever it holds.
   */
  #encoded(value: string): string {
    const decoded = percentDecoded(value);
    this.#decoding = true;
    try {
      const hidden = this.text(decoded);
      // Decoded byte by byte, so only what is ASCII is put back as it was; the rest is encoded.
      return hidden === decoded ? value : hidden.replace(NOT_UNRESERVED, encodeByte);
    } finally {
      this.#decoding = false;
    }
  }

  /** Whether a pair's value, starting at `at`, is hidden: digits after a bare colon only under a key they can be, and not a line and column. */
  #hidesValue(key: string, digits: boolean, text: string, at: number): boolean {
    if (!digits) return this.#keys.isSecret(key) || IDENTIFIED_BY.test(key);
    LINE_AND_COLUMN.lastIndex = at;
    return this.#keys.verdict(key) === SECRET_ANY && !LINE_AND_COLUMN.test(text);
  }

  /** Free text with every secret the grammar knows replaced (see `Redactor.text`). */
  text(text: string): string {
    if (!MAY_HOLD_SECRET.test(text) && !this.#keys.wordBeforeDigits.test(text)) return text;
    const scanner = new RegExp(SCANNER);
    let result = '';
    let copied = 0;
    for (let match = scanner.exec(text); match !== null; match = scanner.exec(text)) {
      const groups = match.groups ?? {};
      const {
        url,
        authPrefix,
        authScheme,
        authValue,
        credPrefix,
        credValue,
        jwt,
        pemBegin,
        xmlTag,
        xmlKey,
        userinfoUser,
        userinfoHost,
        key,
        sep,
        digitsSep,
      } = groups;
      let replacement: string | undefined;
      if (url !== undefined) replacement = this.url(url);
      else if (authPrefix !== undefined && authValue !== undefined) {
        const scheme = authScheme !== undefined && AUTH_SCHEMES.has(authScheme.trimEnd().toLowerCase()) ? authScheme : '';
        replacement = authValue === REDACTED ? undefined : `${authPrefix}${scheme}${REDACTED}`;
      } else if (credPrefix !== undefined && credValue !== undefined)
        replacement = credValue === REDACTED ? undefined : `${credPrefix}${REDACTED}`;
      else if (jwt !== undefined) replacement = REDACTED;
      else if (pemBegin !== undefined) {
        const bodyEnd = text.indexOf('-----END ', scanner.lastIndex);
        const body = text.slice(scanner.lastIndex, bodyEnd === -1 ? text.length : bodyEnd);
        PEM_END.lastIndex = scanner.lastIndex + body.length;
        const end = PEM_END.exec(text)?.[0] ?? '';
        scanner.lastIndex += body.length + end.length; // the key is read once, never scanned
        if (body !== REDACTED) replacement = `${pemBegin}${REDACTED}${end}`;
      } else if (xmlTag !== undefined && xmlKey !== undefined) {
        // A harmless element's text is left to the scan, as a harmless key's value is.
        if (this.#keys.isSecret(xmlKey)) {
          // The lookahead saw the tag's `>`, at most 513 characters on; its attributes are text
          // (`<credentials password="…">`), read once here.
          const close = text.indexOf('>', scanner.lastIndex);
          const attributes = text.slice(scanner.lastIndex, close);
          const from = close + 1;
          const cdata = text.startsWith(CDATA_START, from);
          const until = cdata ? text.indexOf(']]>', from) : text.indexOf('<', from);
          const valueEnd = until === -1 ? text.length : cdata ? until + 3 : until;
          scanner.lastIndex = valueEnd;
          const value = text.slice(from, valueEnd);
          replacement = `${xmlTag}${this.text(attributes)}>${value === '' || value === REDACTED ? value : REDACTED}`;
          if (replacement === text.slice(match.index, valueEnd)) replacement = undefined;
        }
      } else if (userinfoUser !== undefined) {
        if (userinfoHost !== undefined && looksLikeHost(userinfoHost)) replacement = `${userinfoUser}${REDACTED}`;
      }
      // A harmless key's value is left to the scan, which goes on from it: it may still hold a
      // secret ("error: password=…", "{"body":"token=…"}").
      else if (key !== undefined && sep !== undefined && this.#hidesValue(key, digitsSep !== undefined, text, scanner.lastIndex)) {
        PEM_VALUE.lastIndex = scanner.lastIndex;
        // `private_key: -----BEGIN …`: the whole key is hidden by the scan, not only its first word.
        if (!PEM_VALUE.test(text)) {
          PAIR_VALUE.lastIndex = scanner.lastIndex;
          const value = PAIR_VALUE.exec(text)?.[0] ?? '';
          scanner.lastIndex += value.length; // past the value: it is never read again
          if (quoted(value) !== value) replacement = `${key}${sep}${quoted(value)}`;
        }
      }
      if (replacement !== undefined && replacement !== match[0]) {
        result += text.slice(copied, match.index) + replacement;
        copied = scanner.lastIndex;
      }
    }
    return copied === 0 ? text : result + text.slice(copied);
  }
}
