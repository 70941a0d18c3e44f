/**
 * bench/redaction: what redaction costs per byte on adversarial input (one key after another, each
 * looking secret: `sig0&sig1&…`, the shape that once stalled the event loop; and free text built to
 * be rescanned: `a=a=…`, `a:a:…`, `<a><a>…` and the like), from 1 KB to 1 MB. Uncapped, the ns/byte must stay flat
 * (linear); with the default cap a value's cost stops growing.
 * Run: npm run bench:redaction
 */
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { InFlightSpanProcessor } from 'otel-lifeline';
import { RedactionSpanProcessor } from 'otel-lifeline/sdk';
import { adversarialQuery, fixed, repeatedTo, summarize, table, WORST_ADVERSARIAL_TEXT } from './support.ts';

const ROUNDS = 7;
/** The worst units against the scanner's later alternatives (a colon without a space, an XML tag, `user:password@`). */
const LATER_ADVERSARIAL_TEXT: readonly (readonly [shape: string, unit: string])[] = [
  ['`a:a:…`', 'a:'],
  ['`<a><a>…`', '<a>'],
  ['`a:b@a:b@…`', 'a:b@'],
  // A second review's: digits after a colon under a secret key, a tag's attributes, an empty user.
  ['`pin:1pin:1…`', 'pin:1'],
  ['`<a <a <a …`', '<a '],
  ['`:a@b:1 :a@b:1 …`', ':a@b:1 '],
];
const SIZES = [1_024, 16_384, 262_144, 1_048_576];
/** Bytes redacted per round and size: small inputs are repeated, so every cell does the same work. */
const BYTES_PER_ROUND = 4 * 1_048_576;

const uncapped = new InFlightSpanProcessor({ redact: { maxValueLength: Infinity } }).redactor;
const capped = new InFlightSpanProcessor().redactor;
/** A shape: the attribute key, and the value for `bytes` of input whose keys start at `first`. */
const shapes: [string, string, (bytes: number, first: number) => string][] = [
  ['url.full, keys only (`sig0&sig1&…`)', 'url.full', (bytes, first) => `https://h.example/p?${adversarialQuery(bytes, '', first)}`],
  [
    'url.full, every key secret with a value (`sig0=1&…`)',
    'url.full',
    (bytes, first) => `https://h.example/p?${adversarialQuery(bytes, '=1', first)}`,
  ],
  ['url.query, every key secret with a value', 'url.query', (bytes, first) => `?${adversarialQuery(bytes, '=1', first)}`],
  [
    'free text (`exception.message`), `sig0=1 sig1=1 …`',
    'exception.message',
    (bytes, first) => adversarialQuery(bytes, '=1', first).replaceAll('&', ' '),
  ],
  // A header an attacker writes, recorded as free text: one unit repeated (no keys of its own).
  ...[...WORST_ADVERSARIAL_TEXT, ...LATER_ADVERSARIAL_TEXT].map(([shape, unit]): [string, string, (bytes: number) => string] => [
    `free text (\`user_agent.original\`), ${shape}`,
    'user_agent.original',
    (bytes) => repeatedTo(unit, bytes),
  ]),
];

/**
 * Inputs of `size` bytes, `BYTES_PER_ROUND` in all, each with keys of its own: the redactor
 * remembers verdicts for recurring keys, and an attacker's keys do not recur.
 */
function inputsOf(make: (bytes: number, first: number) => string, size: number): string[] {
  const count = Math.max(1, Math.round(BYTES_PER_ROUND / size));
  return Array.from({ length: count }, (_, i) => make(size, 100_000 + i * Math.ceil(size / 6)));
}

/** ns per input byte of redacting every input as attribute `key`. */
function nsPerByte(redactor: typeof uncapped, key: string, inputs: readonly string[]): number {
  let bytes = 0;
  const started = process.hrtime.bigint();
  for (const value of inputs) {
    redactor.attribute(key, value);
    bytes += value.length;
  }
  return Number(process.hrtime.bigint() - started) / bytes;
}

const rows: string[][] = [];
for (const [shape, key, make] of shapes) {
  const inputs = SIZES.map((size) => inputsOf(make, size));
  for (const values of inputs) nsPerByte(uncapped, key, values); // warm up
  const perSize = inputs.map((): number[] => []);
  // Sizes interleaved within a round, so a slow minute of the machine hits them all alike.
  for (let round = 0; round < ROUNDS; round++) inputs.forEach((values, i) => perSize[i]?.push(nsPerByte(uncapped, key, values)));
  const medians = perSize.map((values) => summarize(values));
  const first = medians[0]?.median ?? Number.NaN;
  medians.forEach((sample, i) => {
    rows.push([
      shape,
      `${fixed((inputs[i]?.[0]?.length ?? 0) / 1_024, 0)} KiB`,
      fixed(sample.median, 1),
      `${fixed(sample.min, 1)}–${fixed(sample.max, 1)}`,
      fixed(sample.median / first, 2),
    ]);
  });
}
console.log(
  `## Redaction of adversarial input, uncapped: ns per input byte, median of ${ROUNDS} rounds × ${BYTES_PER_ROUND / 1_048_576} MiB\n`,
);
table(['input', 'size', 'ns / byte', 'min–max', 'ratio to 1 KiB'], rows);

// With the default cap, and the way a service pays it: one span carrying the URL, through the redaction processor.
const provider = new TracerProvider({ spanProcessors: [new RedactionSpanProcessor()] });
const tracer = provider.getTracer('bench');
/** 20 URLs of one shape, keys distinct across them (an attacker need not repeat a key). */
const urls = (keys: (first: number) => string) =>
  Array.from({ length: 20 }, (_, i) => `https://h.example/p?${keys(100_000 + i * 200_000)}`);
const userAgents = (bytes: number) => Array.from({ length: 20 }, () => repeatedTo('a=', bytes));
const cappedRows: string[][] = [];
for (const [label, key, batch] of [
  [
    "2,460 secret-looking keys with values (the issue's request)",
    'url.full',
    urls((first) => Array.from({ length: 2_460 }, (_, i) => `sig${first + i}=x`).join('&')),
  ],
  ['1 MiB of `sig0=1&…`', 'url.full', urls((first) => adversarialQuery(1_048_576, '=1', first))],
  ["16 KiB `User-Agent` of `a=a=…` (the review's request)", 'user_agent.original', userAgents(16_384)],
  ['1 MiB `User-Agent` of `a=a=…`', 'user_agent.original', userAgents(1_048_576)],
] as const) {
  const perCall: number[] = [];
  const perSpan: number[] = [];
  for (let round = 0; round < ROUNDS + 2; round++) {
    let started = process.hrtime.bigint();
    for (const value of batch) capped.attribute(key, value);
    const call = Number(process.hrtime.bigint() - started) / batch.length / 1_000;
    started = process.hrtime.bigint();
    for (const value of batch) tracer.startSpan('GET', { attributes: { [key]: value, 'http.request.method': 'GET' } }).end();
    const span = Number(process.hrtime.bigint() - started) / batch.length / 1_000;
    if (round >= 2) {
      perCall.push(call);
      perSpan.push(span);
    }
  }
  const call = summarize(perCall);
  const span = summarize(perSpan);
  cappedRows.push([
    label,
    `${fixed((batch[0]?.length ?? 0) / 1_024, 1)} KiB`,
    `${fixed(call.median, 0)} (${fixed(call.min, 0)}–${fixed(call.max, 0)})`,
    `${fixed(span.median, 0)} (${fixed(span.min, 0)}–${fixed(span.max, 0)})`,
  ]);
}
console.log(
  `## With the default cap (16 KiB per value): µs per redaction, and per span through RedactionSpanProcessor, median (min–max) of ${ROUNDS} rounds × 20\n`,
);
table(['value', 'size', 'Redactor.attribute µs', 'span start + end µs'], cappedRows);
await provider.shutdown();
