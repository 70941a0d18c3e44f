// The grammar redaction reads: what a secret looks like in free text, a URL and a query, as
// regular expressions built once. Each is written so that a scan stays linear in its input (see
// the note above the scanner's alternatives); `Scanner` applies them.

/** What a secret is replaced with wherever lifeline redacts: `token=REDACTED`, `Authorization: Bearer REDACTED`. */
export const REDACTED = 'REDACTED';

/** Rounds of percent-decoding a key gets: `%2574oken` is `token` encoded twice; bounded, each round is a pass over the key. */
const DECODING_ROUNDS = 3;

/*
 * Free text is scanned once, left to right, by one regex of eight alternatives; whichever starts
 * first wins, so a credential is never taken for a pair nor a pair's value for a key. Each
 * alternative can only start where its first character follows a character it cannot contain
 * (lookbehinds) or at a bounded prefix, and the scan never steps back over what a match read, so
 * no position is scanned more than a bounded number of times: linear in the text.
 */
/** A URL: handed to `Scanner.url`. A scheme of at most 32 characters: an unbounded one backtracks over long text. */
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
export const AUTH_SCHEMES = new Set(
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
export const PEM_END = /-----END [A-Z0-9 ]{0,64}-----/y;
/** A PEM private key as a pair's value, quoted or not. */
export const PEM_VALUE = new RegExp(String.raw`(?:\\?["'])?${PEM_SOURCE}`, 'iy');
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
export const CDATA_START = '<![CDATA[';
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
export const PAIR_VALUE = /"(?:[^"\\\r\n]|\\.)*"?|\\"[^"\\\r\n]*(?:\\")?|'[^'\r\n]*'?|[^\s&;,"'\\]+/y;
export const IDENTIFIED_BY = /^identified\s+by$/i;
/** Digits after a colon that are a line and a column (`at /app/token:12:3`), not a value. */
export const LINE_AND_COLUMN = /\d+:\d/y;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;
export const SCANNER = new RegExp(
  [URL_SOURCE, AUTH_HEADER_SOURCE, CREDENTIAL_SOURCE, JWT_SOURCE, PEM_SOURCE, XML_SOURCE, USERINFO_SOURCE, PAIR_SOURCE].join('|'),
  'gi',
);
export const JWT = new RegExp(JWT_SOURCE, 'g');
/**
 * What each of the scanner's alternatives needs (a `=`, a quote, a `<`, an `@`, a `:` but before a
 * digit, `eyJ`, a scheme word, `PRIVATE KEY`): text with none of them, most attribute values (a
 * `User-Agent`'s `rv:109.0`, a stack's `file.js:12:3`), is returned without scanning.
 */
export const MAY_HOLD_SECRET = /[='"<@]|:(?![\d:])|eyJ|bearer|basic|authorization|private key/i;
const PERCENT_ESCAPE = /%([0-9a-f]{2})/gi;
/**
 * What a secret in a parameter's value that is itself text needs, percent-encoded once to three
 * times: `=` (`next=%2Fcb%3Ftoken%3D…`), `:` and `@` (`next=https%3A%2F%2Fu%3Apw%40host`), a space
 * (`Bearer%20…`), a quote (`%7B%22token%22…`), `<` (`%3Cpassword%3E…`).
 */
export const ENCODED_SEPARATOR = /%(?:25){0,2}(?:3d|3a|40|20|22|27|3c)/i;
/** What a URL keeps unencoded in a parameter's value (RFC 3986's unreserved, and `!*'()` as encodeURIComponent). */
export const NOT_UNRESERVED = /[^\w.~!*'()-]/g;
/** What separates a query's parameters: `&`, and `;` (`?a=1;token=…`); captured, so a split keeps them, the separators at odd indexes. */
export const QUERY_SEPARATOR = /([&;])/;
/** `;name=value` path parameters (`;jsessionid=`). */
export const PATH_PARAM = /;([^/;=?#]*)=([^/;?#]*)/g;
/** What `Scanner.url` looks for; a URL with none of it is returned as it is. */
export const URL_MAY_HOLD_SECRET = /[?#@;]|eyJ/;

/** `text` percent-decoded up to {@link DECODING_ROUNDS} times: `%2574oken` is `token` encoded twice. */
export function percentDecoded(text: string): string {
  let decoded = text;
  for (let round = 0; round < DECODING_ROUNDS && decoded.includes('%'); round++) {
    decoded = decoded.replace(PERCENT_ESCAPE, (_escape, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
  }
  return decoded;
}

/** A host with a port, `localhost`, an IPv4 address, or a name whose last label holds a letter (`db.internal`; not `18.2.0` nor `origin`). */
export function looksLikeHost(host: string): boolean {
  if (host.includes(':') || host.toLowerCase() === 'localhost' || IPV4.test(host)) return true;
  const dot = host.lastIndexOf('.');
  return dot !== -1 && /[a-z]/i.test(host.slice(dot + 1));
}

/** REDACTED in the quotes the value had, so JSON and SQL stay well-formed. */
export function quoted(value: string): string {
  for (const quote of ['\\"', '"', "'"]) {
    if (value.startsWith(quote)) return `${quote}${REDACTED}${value.length > quote.length && value.endsWith(quote) ? quote : ''}`;
  }
  return REDACTED;
}

/** A byte (a character of up to 8 bits, as percent-decoding gave it) as `%XX`; any other character as UTF-8. */
export function encodeByte(char: string): string {
  const code = char.charCodeAt(0);
  return code > 0xff ? encodeURIComponent(char) : `%${code.toString(16).toUpperCase().padStart(2, '0')}`;
}
