import { SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { spanHeapBytes } from '../../src/sampling/span-heap-bytes.js';

/** The parts of an ended span the estimate reads. */
function span(fields: Partial<Pick<ReadableSpan, 'name' | 'attributes' | 'events' | 'links' | 'status'>>): ReadableSpan {
  return {
    name: 'GET',
    attributes: {},
    events: [],
    links: [],
    status: { code: SpanStatusCode.UNSET },
    ...fields,
  } as unknown as ReadableSpan;
}

describe('spanHeapBytes: what an ended span holds', () => {
  it("counts an error's status message as the string it is (an exception's text may be 16 K chars)", () => {
    const message = 'connect ECONNREFUSED '.repeat(800);
    const without = spanHeapBytes(span({ status: { code: SpanStatusCode.ERROR } }));
    expect(spanHeapBytes(span({ status: { code: SpanStatusCode.ERROR, message } })) - without).toBeGreaterThanOrEqual(message.length);
    // Two bytes a char past U+00FF.
    expect(spanHeapBytes(span({ status: { code: SpanStatusCode.ERROR, message: 'é€'.repeat(8_000) } })) - without).toBeGreaterThanOrEqual(
      32_000,
    );
  });
});
