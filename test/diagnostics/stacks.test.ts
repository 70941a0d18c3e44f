import { describe, expect, it } from 'vitest';
import { captureStack, userFrames } from '../../src/diagnostics/stacks.js';

/** `Error`'s formatter hook, which a program may set or unset. */
const hooks = Error as { prepareStackTrace?: ((error: Error, sites: (NodeJS.CallSite & { toString(): string })[]) => unknown) | undefined };

async function inner(): Promise<string> {
  await Promise.resolve();
  return captureStack();
}
async function outer(): Promise<string> {
  return await inner();
}

describe('captureStack', () => {
  it("keeps the user's frames as text (async callers included) and leaves the stack settings as they were", async () => {
    const limit = Error.stackTraceLimit;
    const vitests = hooks.prepareStackTrace; // vitest maps positions with its own formatter
    hooks.prepareStackTrace = undefined; // as in a process without one: lifeline formats
    try {
      const frames = userFrames(await outer());
      expect(frames[0]).toMatch(/^at inner \(.*stacks\.test\.ts:\d+:\d+\)$/);
      expect(frames[1]).toMatch(/^at async outer /);
      expect(frames.some((f) => f.includes('/src/diagnostics/'))).toBe(false);
      expect(Error.stackTraceLimit).toBe(limit);
      expect(hooks.prepareStackTrace).toBeUndefined();
    } finally {
      hooks.prepareStackTrace = vitests;
    }
  });

  it("defers to someone else's formatter (source maps), and filters its text", () => {
    const prepare = hooks.prepareStackTrace;
    hooks.prepareStackTrace = (error, sites) => `${String(error)}\n${sites.map((site) => `    at ${site.toString()} [mapped]`).join('\n')}`;
    try {
      const frames = userFrames(captureStack());
      expect(frames[0]).toMatch(/^at .*stacks\.test\.ts:\d+:\d+\)? \[mapped\]$/);
      expect(frames.some((f) => f.includes('/src/diagnostics/'))).toBe(false);
    } finally {
      hooks.prepareStackTrace = prepare;
    }
  });

  it('has no frames for no stack', () => {
    expect(userFrames(undefined)).toEqual([]);
    expect(userFrames('')).toEqual([]);
  });
});
