import { describe, expect, it } from 'vitest';
import { freePort } from '../support/node.js';
import { startService } from '../support/service.js';

// A collector unreachable for a long time (nothing listens: every export refused at once) while the
// service ends 200 spans a second of 32 KiB each. What the exporter keeps for a retry is bounded
// (LIFELINE_EXPORT_BUFFER_BYTES, 16 MiB by default), so the heap must level off within seconds and
// stay there. OUTAGE_SECONDS lengthens it (docs/reliability.md's figure is from 600).
const OUTAGE_MS = Number(process.env.OUTAGE_SECONDS ?? 60) * 1_000;
const SPAN_BYTES = 32 * 1_024;
const BUFFER_BYTES = 16 * 2 ** 20;
const MB = 2 ** 20;

interface HeapSample {
  at: number;
  spans: number;
  heapUsed: number;
  rss: number;
}

describe('a collector unreachable for long', { timeout: OUTAGE_MS + 60_000 }, () => {
  it('costs bounded memory: the heap levels off at the export buffer and stays; drops are counted and said', async () => {
    const port = await freePort(); // nothing listens
    const app = await startService(
      'test/fixtures/span-emitter.mjs',
      {
        OTEL_SERVICE_NAME: 'outage',
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(port)}`,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        LIFELINE_PROBE_PORT: '0',
        LIFELINE_LOG_LEVEL: 'warn',
        SPANS: String(Number.MAX_SAFE_INTEGER),
        SPAN_EVERY_MS: '5',
        SPAN_BYTES: String(SPAN_BYTES),
        HEAP_EVERY_MS: '1000',
      },
      ['--expose-gc', '--import', 'otel-lifeline/register'],
    );
    try {
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      const samples = app
        .stdout()
        .split('\n')
        .filter((line) => line.includes('"heapUsed"'))
        .map((line) => JSON.parse(line) as HeapSample);
      const start = samples[0]?.heapUsed ?? 0;
      // Once the buffer is full (~3 s at this rate), give it 10 s to settle; then it must not grow.
      const settled = samples.filter((s) => s.at - (samples[0]?.at ?? 0) >= 10_000);
      const firstSettled = settled.slice(0, 5).reduce((max, s) => Math.max(max, s.heapUsed), 0);
      const heapMax = Math.max(...samples.map((s) => s.heapUsed));
      const lastFifth = settled.slice(-Math.max(1, Math.floor(settled.length / 5)));
      const offered = ((samples.at(-1)?.spans ?? 0) * SPAN_BYTES) / MB;
      console.log(
        `collector unreachable ${String(OUTAGE_MS / 1_000)} s, ${String(samples.at(-1)?.spans ?? 0)} spans of 32 KiB (${offered.toFixed(0)} MiB) ended: heap after GC ${(start / MB).toFixed(1)} MB at start, ${(firstSettled / MB).toFixed(1)} MB at 10 s, max ${(heapMax / MB).toFixed(1)} MB, last fifth max ${(Math.max(...lastFifth.map((s) => s.heapUsed)) / MB).toFixed(1)} MB; RSS last ${((samples.at(-1)?.rss ?? 0) / MB).toFixed(0)} MB`,
      );
      expect(settled.length).toBeGreaterThan(5);
      expect(offered).toBeGreaterThan((10 * BUFFER_BYTES) / MB); // far more than the buffer holds went by
      // The buffer's bytes, the batch processor's queue in flight, and V8's slack: nowhere near what was offered.
      expect(heapMax - start).toBeLessThan(2 * BUFFER_BYTES + 32 * MB);
      expect(Math.max(...lastFifth.map((s) => s.heapUsed))).toBeLessThan(firstSettled + 8 * MB);
      expect(app.stdout()).toContain('spans dropped');
    } finally {
      await app.stop();
    }
  });
});
