import { Memo } from '../memo/index.js';
import { ATTR_DEADLINE_AT, ATTR_DEADLINE_SOURCE } from '../semconv/index.js';
import { REDACTED } from './patterns.js';
import { NOT_SECRET, SECRET_ANY, SECRET_TEXT, type KeyVerdict, type SecretKeys } from './secret-keys.js';

// What a span attribute's name says about its value: a URL, a name never scanned, or a secret
// whole (a listed header, `db.password`, `app.apiKey`). `Redactor.attribute` walks by it.

export const URL_KEYS = new Set(['url.full', 'http.url', 'url.original', 'http.target', 'url.path']);
/**
 * Attributes whose values are names, numbers or addresses by their semantic convention, never free
 * text: not scanned (they are on every span, and scanning them was most of redaction's cost), but
 * still cut at `maxValueLength` (a client chooses its `Host` and `X-Forwarded-For`).
 */
export const PLAIN_KEYS: ReadonlySet<string> = new Set([
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

/** Whether an attribute's value is a secret by the attribute's name, per attribute name. */
export class SecretAttributes {
  readonly #keys: SecretKeys;
  /** Header names whose values are always replaced, lower case. */
  readonly #headers: readonly string[];
  /** Verdicts per attribute name (a name is longer than a key: its namespace). */
  readonly #verdicts = new Memo<KeyVerdict>(1_024, 128);

  constructor(keys: SecretKeys, headers: readonly string[]) {
    this.#keys = keys;
    this.#headers = headers;
  }

  /** Whether an attribute's value is a secret by the attribute's name (a listed header, `db.password`, `app.apiKey`). */
  verdict(key: string): KeyVerdict {
    return this.#verdicts.get(key, this.#namesSecret);
  }

  // A field, not a method: `Memo.get` takes it as it is, with no closure made per call.
  readonly #namesSecret = (key: string): KeyVerdict => {
    if (key.startsWith('http.request.header.') || key.startsWith('http.response.header.')) {
      const header = key
        .slice(key.indexOf('.header.') + 8)
        .toLowerCase()
        .replace(/_/g, '-');
      // Listed headers, and any header named like a secret (x-auth-token, x-goog-api-key, …).
      return this.#headers.includes(header) ? SECRET_TEXT : this.#keys.verdict(header);
    }
    // The name after the namespace: `session.id` is an id, `aws.secretsmanager.secret.arn` an ARN,
    // and a bare `.key` the namespace's key (`cache.key`, `feature_flag.key`, `aws.s3.key`).
    const dot = key.lastIndexOf('.');
    const name = key.slice(dot + 1);
    if (CONVENTION_NAMES.has(key) || (dot !== -1 && name.toLowerCase() === 'key')) return NOT_SECRET;
    return this.#keys.verdict(name);
  };
}

/** The value of an attribute whose name says it is a secret: hidden, or `undefined` when it already is. */
export function hiddenByName(value: string | readonly unknown[], verdict: KeyVerdict): unknown {
  const hidden = (item: unknown) => (typeof item === 'string' ? item !== REDACTED : verdict === SECRET_ANY && typeof item === 'number');
  if (typeof value === 'string') return hidden(value) ? REDACTED : undefined;
  return value.some(hidden) ? value.map((item: unknown) => (hidden(item) || item === REDACTED ? REDACTED : item)) : undefined;
}
