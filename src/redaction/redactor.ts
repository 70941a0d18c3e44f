import { invalidOption } from '../errors/index.js';
import { Memo } from '../memo/index.js';
import { ATTR_DEADLINE_AT, ATTR_DEADLINE_SOURCE } from '../semconv/index.js';

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
   * Default {@link DEFAULT_SECRET_WORDS}; extend it rather than replace it:
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

export const REDACTED = 'REDACTED';

/**
 * Words that name a secret (matched against key segments, see {@link RedactionOptions.queryKeys}).
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
const URL_KEYS = new Set(['url.full', 'http.url', 'url.original', 'http.target', 'url.path']);
/**
 * Attributes whose values are names, numbers or addresses by their semantic convention, never free
 * text: not scanned (they are on every span, and scanning them was most of redaction's cost), but
 * still cut at `maxValueLength` (a client chooses its `Host` and `X-Forwarded-For`).
 */
const PLAIN_KEYS: ReadonlySet<string> = new Set([
  'http.request.method',
  'http.request.method_original',
  'http.method',
  'http.scheme',
  'http.flavor',
  'url.scheme',
  'server.address',
  'client.address',
  'network.peer.address',
  'network.local.address',
  'network.protocol.name',
  'network.protocol.version',
  'network.transport',
  'network.type',
  'net.host.name',
  'net.host.ip',
  'net.peer.name',
  'net.peer.ip',
  'net.transport',
  'rpc.system',
  'rpc.service',
  'rpc.method',
  ATTR_DEADLINE_AT,
  ATTR_DEADLINE_SOURCE,
]);
/**
 * Attributes of the semantic conventions whose name ends in a secret word but whose value is a
 * name (a message's routing or ordering key): scanned as text, not replaced whole. A bare `….key`
 * (`feature_flag.key`, `aws.s3.key`) needs no listing.
 */
const CONVENTION_NAMES: ReadonlySet<string> = new Set([
  'messaging.gcp_pubsub.message.ordering_key',
  'messaging.rabbitmq.destination.routing_key',
]);
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
const NOT_SECRET = 0;
const SECRET_TEXT = 1;
const SECRET_ANY = 2;
type KeyVerdict = typeof NOT_SECRET | typeof SECRET_TEXT | typeof SECRET_ANY;
/** Rounds of percent-decoding a key gets: `%2574oken` is `token` encoded twice; bounded, each round is a pass over the key. */
const DECODING_ROUNDS = 3;

/*
 * Free text is scanned once, left to right, by one regex of eight alternatives; whichever starts
 * first wins, so a credential is never taken for a pair nor a pair's value for a key. Each
 * alternative can only start where its first character follows a character it cannot contain
 * (lookbehinds) or at a bounded prefix, and the scan never steps back over what a match read, so
 * no position is scanned more than a bounded number of times: linear in the text.
 */
/** A URL: handed to {@link Redactor.url}. A scheme of at most 32 characters: an unbounded one backtracks over long text. */
const URL_SOURCE = String.raw`(?<url>\b[a-z][a-z0-9+.-]{0,31}:\/\/[^\s"'<>\\]*)`;
/**
 * `Authorization: <Scheme> <credentials>` in any form (header line, `authorization=`, a JSON
 * key): the credentials are hidden whatever the scheme. A registered scheme stays, it is
 * diagnostic; any other word there may be the credential itself (`authorization=s3cret (retry)`),
 * so it is hidden with what follows it. A value already redacted is not read as a scheme, so a
 * second pass changes nothing.
 */
const AUTH_HEADER_SOURCE = String.raw`(?<authPrefix>(?<![\w-])(?:proxy-)?authorization\\?["']?\s*[:=]\s*\\?["']?)(?<authScheme>(?!${REDACTED}\b)[a-z][\w-]{0,31}\s+)?(?<authValue>[^\s"'\\,;]+)`;
/** Authorization schemes shown as they are: IANA's registry, and common ones of cloud APIs. */
const AUTH_SCHEMES = new Set(
  'basic bearer concealed digest dpop gnap hoba mutual negotiate oauth privatetoken scram-sha-1 scram-sha-256 vapid token ntlm apikey aws4-hmac-sha256 sharedkey sharedaccesssignature hawk ssws splunk'.split(
    ' ',
  ),
);
/** A bare `Bearer x` / `Basic x` credential. */
const CREDENTIAL_SOURCE = String.raw`(?<credPrefix>\b(?:bearer|basic)\s+)(?<credValue>[A-Za-z0-9._~+/=-]+)`;
/**
 * A PEM private key's first line (`-----BEGIN RSA PRIVATE KEY-----`, PKCS#8, OpenSSH, PGP): all
 * up to the next `-----END` (or the end of the text: a cut key is still a key) is hidden.
 */
const PEM_SOURCE = String.raw`(?<pemBegin>-----BEGIN (?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?-----)`;
const PEM_END = /-----END [A-Z0-9 ]{0,64}-----/y;
/** A PEM private key as a pair's value, quoted or not. */
const PEM_VALUE = new RegExp(String.raw`(?:\\?["'])?${PEM_SOURCE}`, 'iy');
/**
 * `user:password@host` without a scheme (a DSN, a Redis address): the password is hidden, the user
 * and host stay. The user may be empty (Redis's `:password@redis:6379`) after a space, a quote,
 * `=`, `/` or at the start. The host is captured and must look like one ({@link looksLikeHost}), so
 * `node:20@sha256:…`, `app:v1.2@prod-cluster` and `refs:main@origin` are no passwords; `mailto:`,
 * `sip:` and `xmpp:` addresses and package specs (`npm:lodash@4.17.21`) are left alone.
 */
const USERINFO_SOURCE = String.raw`(?<userinfoUser>(?:(?<![\w.%+~-])(?!(?:mailto|sips?|xmpp|npm|yarn|pnpm|docker):)[\w.%+~-]{1,64}|(?<![^\s"'=(\[,/])):)(?<userinfoPassword>[^\s@/:"'<>\\]{1,256})(?=@(?<userinfoHost>[\w-]{1,63}(?:\.[\w-]{1,63}){0,126}(?::\d{1,5})?)(?![\w.:@-]))`;
/**
 * An XML element's start tag (`<password>`, `<Password >`, `<wsse:Password Type="…">`): a secret
 * one's text is hidden (also in CDATA). The match ends at the name and a lookahead finds the tag's
 * `>` before any other `<`, so a harmless element's attributes are scanned as text (`<user
 * password="…">`) and no tag is read past the next one.
 */
const XML_SOURCE = String.raw`(?<xmlTag><(?<xmlKey>[\w.\-[\]%:]{1,128})(?=(?:\s[^<>]{0,512})?>))`;
const CDATA_START = '<![CDATA[';
/** A JWT (header.payload[.signature]; both JSON objects, so both base64url parts start `eyJ`). */
const JWT_SOURCE = String.raw`(?<jwt>(?<![\w-])eyJ[\w-]+\.eyJ[\w-]+(?:\.[\w-]*)?)`;
/**
 * `key=value`, `key: value`, `key:value` (before digits alone, `digitsSep`: only a key ending in a
 * word that digits can be, `pin:4821`, since `file.js:12:3` and `auth-service:8080` are a line and
 * a port; not `::` or `:/`), `"key":"value"`
 * (also as escaped JSON inside a string), `key="value"`, and a key followed by a quoted value
 * (SQL's `PASSWORD 'x'`, `IDENTIFIED BY 'x'`). Keys are bounded to 128 characters so a long run
 * of key characters costs at most 128 steps per run. The match stops before the value (a
 * lookahead only checks that one starts: {@link PAIR_VALUE}'s first characters): a secret key's
 * value is then read once by {@link PAIR_VALUE}, a harmless key's is scanned on as text (it may
 * hold a secret). Matching the value here and rescanning it read `a=a=a=…` once per `=`: quadratic.
 */
const PAIR_SOURCE = String.raw`(?<![\w.\-[\]%])(?<key>identified\s+by|[\w.\-[\]%]{1,128})(?<sep>\s*=\s*|:\s+|:(?![:/]|\d+(?!\w))|(?<digitsSep>:)(?=\d)|\\?["']\s*[:=]\s*|\s+(?=\\?["']))(?=\\"|["']|[^\s&;,"'\\])`;
/** The value of a secret pair, read where the pair's match ends: a quoted string (JSON, escaped JSON, SQL), or up to a space, `&;,`, a quote or a backslash. */
const PAIR_VALUE = /"(?:[^"\\\r\n]|\\.)*"?|\\"[^"\\\r\n]*(?:\\")?|'[^'\r\n]*'?|[^\s&;,"'\\]+/y;
const IDENTIFIED_BY = /^identified\s+by$/i;
/** Digits after a colon that are a line and a column (`at /app/token:12:3`), not a value. */
const LINE_AND_COLUMN = /\d+:\d/y;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;
const SCANNER = new RegExp(
  [URL_SOURCE, AUTH_HEADER_SOURCE, CREDENTIAL_SOURCE, JWT_SOURCE, PEM_SOURCE, XML_SOURCE, USERINFO_SOURCE, PAIR_SOURCE].join('|'),
  'gi',
);
const JWT = new RegExp(JWT_SOURCE, 'g');
/**
 * What each of the scanner's alternatives needs (a `=`, a quote, a `<`, an `@`, a `:` but before a
 * digit, `eyJ`, a scheme word, `PRIVATE KEY`): text with none of them, most attribute values (a
 * `User-Agent`'s `rv:109.0`, a stack's `file.js:12:3`), is returned without scanning.
 */
const MAY_HOLD_SECRET = /[='"<@]|:(?![\d:])|eyJ|bearer|basic|authorization|private key/i;
/** Boundaries inside a key: camelCase humps (`apiKey`, `APIKey`) and letter/digit changes (`sig0`). */
const KEY_HUMPS = /(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])/g;
const NOT_ALPHANUMERIC = /[^a-z0-9]+/;
const PERCENT_ESCAPE = /%([0-9a-f]{2})/gi;
/**
 * What a secret in a parameter's value that is itself text needs, percent-encoded once to three
 * times: `=` (`next=%2Fcb%3Ftoken%3D…`), `:` and `@` (`next=https%3A%2F%2Fu%3Apw%40host`), a space
 * (`Bearer%20…`), a quote (`%7B%22token%22…`), `<` (`%3Cpassword%3E…`).
 */
const ENCODED_SEPARATOR = /%(?:25){0,2}(?:3d|3a|40|20|22|27|3c)/i;
/** What a URL keeps unencoded in a parameter's value (RFC 3986's unreserved, and `!*'()` as encodeURIComponent). */
const NOT_UNRESERVED = /[^\w.~!*'()-]/g;
/** What separates a query's parameters: `&`, and `;` (`?a=1;token=…`); captured, so a split keeps them, the separators at odd indexes. */
const QUERY_SEPARATOR = /([&;])/;
/** `;name=value` path parameters (`;jsessionid=`). */
const PATH_PARAM = /;([^/;=?#]*)=([^/;?#]*)/g;

/** Clean values remembered at most per kind, and the longest remembered (see `Redactor.#clean`). */
const MAX_CLEAN_VALUES = 1_024;
const MAX_CLEAN_LENGTH = 512;
/** What `#url` looks for; a URL with none of it is returned as it is. */
const URL_MAY_HOLD_SECRET = /[?#@;]|eyJ/;
/** How a value is read (a constant, not a closure: this runs for every attribute of every span). */
const TEXT_VALUE = 0;
const URL_VALUE = 1;
const QUERY_VALUE = 2;
type ValueKind = typeof TEXT_VALUE | typeof URL_VALUE | typeof QUERY_VALUE;

/** Redacts secrets from URLs, attribute values and free text, in time linear in their length. */
export class Redactor {
  readonly #words: ReadonlySet<string>;
  /** The longest word, so a run of joined segments stops growing once it cannot match. */
  readonly #longestWord: number;
  readonly #headers: readonly string[];
  readonly #maxValueLength: number;
  /**
   * Values redaction left unchanged, per kind (text, URL, query): a service records the same few
   * URLs, routes and user agents on span after span, and scanning them again finds nothing again.
   * Only what spans carry out as it is gets remembered (never a value that needed redacting), up
   * to 1,024 values of at most 512 characters per kind, for as long as the process lives or until
   * a set fills and is cleared.
   */
  readonly #clean: readonly [Set<string>, Set<string>, Set<string>] = [new Set(), new Set(), new Set()];
  /** Verdicts per key: the same few keys recur on every span. */
  readonly #verdicts = new Memo<KeyVerdict>(1_024, 64);
  /** Verdicts per attribute name (a name is longer than a key: its namespace). */
  readonly #attributeVerdicts = new Memo<KeyVerdict>(1_024, 128);
  /** A secret word right before `:` and a digit (`pin:4821`): text holding one is scanned though it has nothing else {@link MAY_HOLD_SECRET} needs. */
  readonly #wordBeforeDigits: RegExp;
  /** Set while an encoded value is read decoded, so what it holds is decoded once, not once per level. */
  #decoding = false;

  constructor(options: RedactionOptions = {}) {
    const words = (options.queryKeys ?? DEFAULT_SECRET_WORDS)
      .map((word) => word.toLowerCase().replace(/[^a-z0-9]+/g, ''))
      .filter((word) => word !== '');
    this.#words = new Set(words);
    this.#longestWord = Math.max(0, ...words.map((word) => word.length));
    // The colon first: the engine looks for it, and tries the words only there.
    this.#wordBeforeDigits = words.length === 0 ? /$^/ : new RegExp(`:(?<=(?:${[...this.#words].join('|')}):)\\d`, 'i');
    this.#headers = (options.headers ?? DEFAULT_HEADERS).map((h) => h.toLowerCase());
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
    return this.#verdicts.get(key, this.#namesSecret) !== NOT_SECRET;
  }

  readonly #namesSecret = (key: string): KeyVerdict => {
    let decoded = key;
    for (let round = 0; round < DECODING_ROUNDS && decoded.includes('%'); round++) {
      decoded = decoded.replace(PERCENT_ESCAPE, (_escape, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    }
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

  /** Whether an attribute's value is a secret by the attribute's name (a listed header, `db.password`, `app.apiKey`). */
  #attributeVerdict(key: string): KeyVerdict {
    return this.#attributeVerdicts.get(key, this.#namesSecretAttribute);
  }

  readonly #namesSecretAttribute = (key: string): KeyVerdict => {
    if (key.startsWith('http.request.header.') || key.startsWith('http.response.header.')) {
      const header = key
        .slice(key.indexOf('.header.') + 8)
        .toLowerCase()
        .replace(/_/g, '-');
      // Listed headers, and any header named like a secret (x-auth-token, x-goog-api-key, …).
      return this.#headers.includes(header) ? SECRET_TEXT : this.#verdicts.get(header, this.#namesSecret);
    }
    // The name after the namespace: `session.id` is an id, `aws.secretsmanager.secret.arn` an ARN,
    // and a bare `.key` the namespace's key (`cache.key`, `feature_flag.key`, `aws.s3.key`).
    const dot = key.lastIndexOf('.');
    const name = key.slice(dot + 1);
    if (CONVENTION_NAMES.has(key) || (dot !== -1 && name.toLowerCase() === 'key')) return NOT_SECRET;
    return this.#verdicts.get(name, this.#namesSecret);
  };

  /** The redacted value of an attribute, or `undefined` when it needs no change. */
  attribute(key: string, value: unknown): unknown {
    // Most values of a span are numbers and booleans: nothing to read, and a secret only as a
    // number under a name digits can be (`app.pin`; not a count, `gen_ai.usage.input_tokens`).
    if (typeof value !== 'string' && !Array.isArray(value)) {
      return typeof value === 'number' && this.#attributeVerdict(key) === SECRET_ANY ? REDACTED : undefined;
    }
    // Checked before the plain keys are skipped: a name given as a secret word is never skipped.
    const verdict = this.#attributeVerdict(key);
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
    return kind === TEXT_VALUE ? this.#text(value) : kind === URL_VALUE ? this.#url(value) : this.#query(value);
  }

  #url(text: string): string {
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
      head = head.replace(PATH_PARAM, (param: string, name: string) => (this.isSecretKey(name) ? `;${name}=${REDACTED}` : param));
    if (head.includes('eyJ')) head = head.replace(JWT, REDACTED);
    const query = queryAt === -1 ? '' : `?${this.#query(text.slice(queryAt + 1, hashAt === -1 ? text.length : hashAt))}`;
    // OAuth implicit flows put tokens in the fragment: #access_token=…
    const fragment = hashAt === -1 ? '' : `#${this.#query(text.slice(hashAt + 1))}`;
    return `${head}${query}${fragment}`;
  }

  /** One pass over `a=b&c=d;e=f`: each key is checked once, each value kept or replaced once. */
  #query(text: string): string {
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
      if (this.isSecretKey(part.slice(0, eq))) parts[i] = `${part.slice(0, eq + 1)}${REDACTED}`;
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
    let decoded = value;
    for (let round = 0; round < DECODING_ROUNDS && decoded.includes('%'); round++) {
      decoded = decoded.replace(PERCENT_ESCAPE, (_escape, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    }
    this.#decoding = true;
    try {
      const hidden = this.#text(decoded);
      // Decoded byte by byte, so only what is ASCII is put back as it was; the rest is encoded.
      return hidden === decoded ? value : hidden.replace(NOT_UNRESERVED, encodeByte);
    } finally {
      this.#decoding = false;
    }
  }

  /** Whether a pair's value, starting at `at`, is hidden: digits after a bare colon only under a key they can be, and not a line and column. */
  #hidesValue(key: string, digits: boolean, text: string, at: number): boolean {
    if (!digits) return this.isSecretKey(key) || IDENTIFIED_BY.test(key);
    LINE_AND_COLUMN.lastIndex = at;
    return this.#verdicts.get(key, this.#namesSecret) === SECRET_ANY && !LINE_AND_COLUMN.test(text);
  }

  #text(text: string): string {
    if (!MAY_HOLD_SECRET.test(text) && !this.#wordBeforeDigits.test(text)) return text;
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
      if (url !== undefined) replacement = this.#url(url);
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
        if (this.isSecretKey(xmlKey)) {
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
          replacement = `${xmlTag}${this.#text(attributes)}>${value === '' || value === REDACTED ? value : REDACTED}`;
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

/** The first `length` UTF-16 units of `text`, never ending in half a surrogate pair. */
function cut(text: string, length: number): string {
  if (text.length <= length) return text;
  const last = text.charCodeAt(length - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? length - 1 : length);
}

/** A host with a port, `localhost`, an IPv4 address, or a name whose last label holds a letter (`db.internal`; not `18.2.0` nor `origin`). */
function looksLikeHost(host: string): boolean {
  if (host.includes(':') || host.toLowerCase() === 'localhost' || IPV4.test(host)) return true;
  const dot = host.lastIndexOf('.');
  return dot !== -1 && /[a-z]/i.test(host.slice(dot + 1));
}

/** REDACTED in the quotes the value had, so JSON and SQL stay well-formed. */
function quoted(value: string): string {
  for (const quote of ['\\"', '"', "'"]) {
    if (value.startsWith(quote)) return `${quote}${REDACTED}${value.length > quote.length && value.endsWith(quote) ? quote : ''}`;
  }
  return REDACTED;
}

/** A byte (a character of up to 8 bits, as percent-decoding gave it) as `%XX`; any other character as UTF-8. */
function encodeByte(char: string): string {
  const code = char.charCodeAt(0);
  return code > 0xff ? encodeURIComponent(char) : `%${code.toString(16).toUpperCase().padStart(2, '0')}`;
}

/** The value of an attribute whose name says it is a secret: hidden, or `undefined` when it already is. */
function hiddenByName(value: string | readonly unknown[], verdict: KeyVerdict): unknown {
  const hidden = (item: unknown) => (typeof item === 'string' ? item !== REDACTED : verdict === SECRET_ANY && typeof item === 'number');
  if (typeof value === 'string') return hidden(value) ? REDACTED : undefined;
  return value.some(hidden) ? value.map((item: unknown) => (hidden(item) || item === REDACTED ? REDACTED : item)) : undefined;
}

function changedOrUndefined(before: string, after: string): string | undefined {
  return after === before ? undefined : after;
}
