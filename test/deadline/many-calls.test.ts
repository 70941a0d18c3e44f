import { describe, expect, it } from 'vitest';
import { runNode } from '../support/node.js';

describe('100,000 deadline-bound calls (nothing left behind)', () => {
  it.each(['undici', 'node:http'])(
    '%s: retain no heap, raise no MaxListenersExceededWarning, reuse keep-alive sockets',
    async (client) => {
      const result = await runNode(['--expose-gc', 'test/fixtures/many-calls.mjs'], {
        timeoutMs: 120_000,
        env: { ...process.env, CALLS: '100000', CLIENT: client },
      });
      expect(result.stderr).toBe('');
      const report = JSON.parse(result.stdout) as { calls: number; retainedBytes: number; warnings: string[]; connections: number };
      expect(report.calls).toBe(100_000);
      expect(report.warnings).toEqual([]);
      // 1 MiB over 100,000 calls is ~10 bytes a call: less than any object a per-call leak would keep
      // (a Timeout is >100 bytes, a closure >=32), while leaving room for GC and JIT noise.
      expect(report.retainedBytes).toBeLessThan(1024 * 1024);
      // 32 calls in flight: at most 32 connections (plus undici's fetch/request pools), each reused.
      expect(report.connections).toBeLessThanOrEqual(64);
    },
    120_000,
  );
});
