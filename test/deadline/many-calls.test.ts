import { describe, expect, it } from 'vitest';
import { runNode } from '../support/node.js';

// 1,000 calls are enough for what a test can check: a listener added per call trips Node's warning
// after 10, and a socket not reused shows as a connection per call. The heap left behind by 100,000
// calls is measured by bench/many-calls (npm run bench:many-calls): too slow for a test on a loaded machine.
describe('1,000 deadline-bound calls in a row', () => {
  it.each(['undici', 'node:http'])('%s: raise no MaxListenersExceededWarning, reuse keep-alive sockets', async (client) => {
    const result = await runNode(['test/fixtures/many-calls.mjs'], {
      timeoutMs: 15_000,
      env: { ...process.env, CALLS: '1000', CLIENT: client },
    });
    expect(result.stderr).toBe('');
    const report = JSON.parse(result.stdout) as { calls: number; warnings: string[]; connections: number };
    expect(report.calls).toBe(1_000);
    expect(report.warnings).toEqual([]);
    // 32 calls in flight: at most 32 connections (plus undici's fetch/request pools), each reused.
    expect(report.connections).toBeLessThanOrEqual(64);
  });
});
