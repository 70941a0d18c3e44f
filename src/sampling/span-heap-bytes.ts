// Types only: what a span looks like to a processor.
import type { ReadableSpan } from '@opentelemetry/sdk-trace';

// What an ended SDK span keeps alive on V8's heap (Node 24, 64-bit, no pointer compression),
// measured as heap growth after two GCs over 4,000 real spans held by a processor, less the same
// for spans with nothing in them (`node --expose-gc test/fixtures/evidence-heap.mjs measure`):
//   - a span with a name, no attributes, events or links: 936 B (the span, its context and ids,
//     times, status); the resource, scope and limits are shared by every span, so not counted;
//   - a string: 16 B + 1 B a char (2 for a string with a char past U+00FF), in steps of 8;
//   - an attribute: 8 B of slot while a span has at most 16 (fast properties; 17 measured 31 B an
//     attribute with an 8-char value, 24 of them the value), 38–64 B past it (V8 turns the object
//     into a hash table that doubles: 51 B at 120; counted 48 B, its key's chars making up the
//     rest), plus its value. A key is one interned copy per name: 0 B a span when names repeat (the
//     norm: names are the instrumentation's), 40 B and a hidden class when unique to a span; keys
//     are counted at 1 B a char, between the two (spans with 24 names of their own: 0.76× the real
//     heap, the one shape measured below 0.8×);
//   - a number: 16 B unless a small integer (0 B); a boolean 0 B;
//   - an array: 48 B + 8 B an element, plus each string element;
//   - an event: 222 B with no attributes, plus its name (counted as a string: shared when it repeats)
//     and attributes as above;
//   - a link: 458 B (its context, ids and attributes object), plus its attributes.
const SPAN_BYTES = 936;
const STRING_BYTES = 16;
const FAST_SLOT_BYTES = 8;
const HASHED_SLOT_BYTES = 48;
const MAX_FAST_ATTRIBUTES = 16;
const HEAP_NUMBER_BYTES = 16;
const ARRAY_BYTES = 48;
const ELEMENT_BYTES = 8;
const EVENT_BYTES = 224;
const LINK_BYTES = 460;
/**
 * Strings shorter than this are counted as two-byte without a look (at most 15 B too many): the
 * check costs more than their chars. Longer ones are checked, which costs nothing for a one-byte
 * string (V8 knows no char of it can match).
 */
const CHECKED_STRING_LENGTH = 16;
const TWO_BYTE = /[\u0100-\uffff]/;

/**
 * The bytes an ended span holds on the heap: what keeping it costs, to bound a buffer of them.
 * A sum over its attributes, events and links, with no copy and no encoding.
 */
export function spanHeapBytes(span: ReadableSpan): number {
  // An error's status message may be long (an exception's text): held by the span as any string.
  let bytes =
    SPAN_BYTES + stringBytes(span.name) + (span.status.message ? stringBytes(span.status.message) : 0) + attributesBytes(span.attributes);
  for (const event of span.events) bytes += EVENT_BYTES + stringBytes(event.name) + attributesBytes(event.attributes);
  for (const link of span.links) bytes += LINK_BYTES + attributesBytes(link.attributes);
  return bytes;
}

function attributesBytes(attributes: ReadableSpan['attributes'] | undefined): number {
  let bytes = 0;
  let count = 0;
  for (const key in attributes) {
    bytes += key.length + valueBytes(attributes[key]);
    count++;
  }
  return bytes + count * (count > MAX_FAST_ATTRIBUTES ? HASHED_SLOT_BYTES : FAST_SLOT_BYTES);
}

function valueBytes(value: unknown): number {
  if (typeof value === 'string') return stringBytes(value);
  if (typeof value === 'number') return (value | 0) === value ? 0 : HEAP_NUMBER_BYTES;
  if (!Array.isArray(value)) return 0;
  let bytes = ARRAY_BYTES + value.length * ELEMENT_BYTES;
  for (const item of value) if (typeof item === 'string') bytes += stringBytes(item);
  return bytes;
}

function stringBytes(text: string): number {
  const width = text.length < CHECKED_STRING_LENGTH || TWO_BYTE.test(text) ? 2 : 1;
  return (STRING_BYTES + text.length * width + 7) & ~7;
}
