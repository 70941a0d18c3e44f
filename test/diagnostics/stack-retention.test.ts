import { describe, expect, it } from 'vitest';
import { runNode } from '../support/node.js';

const SPANS = 100;
const MIB = 1024 * 1024;

/**
 * A child process starts `SPANS` spans that never end, each from a closure holding 1 MiB, drops
 * every reference of its own, collects garbage, and prints how much the heap (JS + ArrayBuffers)
 * grew. A creation stack kept unformatted (V8's structured frames) holds each frame's function and
 * receiver, so each closure and its 1 MiB stays alive for as long as the span is tracked.
 */
const CHILD = `
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { Health, InFlightSpanProcessor } from 'otel-lifeline';
const mode = process.env.MODE;
const inFlight = new InFlightSpanProcessor({ captureStacks: mode === 'ticks' ? 'ticks' : 'all' });
const provider = new TracerProvider({ spanProcessors: [inFlight] });
const tracer = provider.getTracer('leak');
const health = new Health({ interval: 3_600_000, tracerProvider: provider });
const h = health.registerLiveness('worker');
const used = () => { globalThis.gc(); globalThis.gc(); const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
let last; // a span (it holds no closure), to read what the tracker kept of its stack
/** The user's tick work: a call that never ends, made from a closure that holds a big buffer. */
function abandon() {
  const big = new Uint8Array(${MIB}).fill(1);
  const call = () => { last = tracer.startSpan('abandoned call'); return big.length; };
  return call();
}
const before = used();
for (let i = 0; i < ${SPANS}; i++) {
  if (mode === 'ticks') {
    health.runRound(); // a round: one tick on offer
    h.take()?.run(abandon); // the span starts in the tick's trace
  }
  else abandon();
}
const after = used();
process.stdout.write(JSON.stringify({ tracked: inFlight.size, growthBytes: after - before, stack: inFlight.get(last.spanContext().spanId)?.stack }));
health.close();
`;

describe('creation stacks do not keep abandoned spans\u2019 objects alive', () => {
  it.each(['ticks', 'all'])(
    "captureStacks '%s': 100 never-ended spans from closures holding 1 MiB each grow the heap < 20 MiB",
    async (mode) => {
      const result = await runNode(['--expose-gc', '--input-type=module', '-e', CHILD], {
        timeoutMs: 30_000,
        env: { ...process.env, MODE: mode },
      });
      expect(result.stderr).toBe('');
      const report = JSON.parse(result.stdout) as { tracked: number; growthBytes: number; stack?: string };
      console.log(`captureStacks '${mode}': ${report.tracked} spans tracked, heap growth ${(report.growthBytes / MIB).toFixed(1)} MiB`);
      // Every span is still tracked (none ended, none evicted): what it holds is what a tracker holds.
      expect(report.tracked).toBeGreaterThanOrEqual(SPANS);
      // The stack is still there to explain the span: the closure and the function that made it.
      expect(report.stack).toMatch(/at call .*\n.*at abandon /);
      // 100 MiB if every closure stays alive; a formatted stack is a few hundred bytes a span.
      expect(report.growthBytes).toBeLessThan(20 * MIB);
    },
    30_000,
  );
});
