import { describe, expect, it } from 'vitest';
import { runNode } from '../support/node.js';

const MIB = 1024 * 1024;
const BOUND = 8 * MIB; // the default maxBufferedBytes
const SPANS = 5_000;

/**
 * A child process (test/fixtures/evidence-heap.mjs, the built package) ends SPANS spans of a shape
 * in traces the sampler drops, through lifeline's processors and an EvidenceSpanProcessor, and
 * prints how much its heap grew after GC: what the evidence buffer holds, as V8 holds it.
 */
async function heapGrowth(env: Record<string, string>): Promise<number> {
  const result = await runNode(['--expose-gc', 'test/fixtures/evidence-heap.mjs'], {
    timeoutMs: 60_000,
    env: { ...process.env, SPANS: String(SPANS), ...env },
  });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const { growthBytes } = JSON.parse(result.stdout) as { growthBytes: number };
  console.log(
    `${env.SHAPE ?? ''} ${JSON.stringify(env)}: heap +${(growthBytes / MIB).toFixed(1)} MiB for a bound of ${String(BOUND / MIB)} MiB`,
  );
  return growthBytes;
}

describe('the evidence buffer holds at most maxBufferedBytes of heap', () => {
  it('5,000 dropped spans of 120 small attributes each, default options: the heap grows at most 1.25× the 8 MiB bound', async () => {
    // Before: 2,048 spans held (the count bound), ~20 MB here (36.5 MB in the service), as
    // the estimate counted ~3.5 KB of chars a span against ~10 KB of heap.
    expect(await heapGrowth({ SHAPE: 'small-attributes' })).toBeLessThanOrEqual(1.25 * BOUND);
  }, 60_000);

  it.each(['small-attributes', 'large-attributes', 'events', 'links'])(
    '5,000 dropped spans of %s, only the byte bound in the way: the heap grows 0.5–1.25× the bound',
    async (shape) => {
      const growth = await heapGrowth({ SHAPE: shape, MAX_BUFFERED_SPANS: '1000000', MAX_BUFFERED_BYTES: String(BOUND) });
      expect(growth).toBeLessThanOrEqual(1.25 * BOUND);
      expect(growth).toBeGreaterThanOrEqual(0.5 * BOUND); // and the buffer is used: the estimate is not far over either
    },
    60_000,
  );
});
