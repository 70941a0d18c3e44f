import { createHook } from 'node:async_hooks';
import { readdirSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';

// The watchdog thread's parts are imported here, in a plain process: doing so must start nothing
// (no timer, no handle) and read nothing of a worker's (workerData, parentPort). Only the thread's
// entry, watchdog-worker.ts, has side effects.
const reads = vi.hoisted(() => [] as string[]);
vi.mock('node:worker_threads', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:worker_threads')>();
  return {
    ...real,
    get workerData(): unknown {
      reads.push('workerData');
      return real.workerData as unknown;
    },
    get parentPort() {
      reads.push('parentPort');
      return real.parentPort;
    },
  };
});

const ENTRY = 'watchdog-worker';
/** Every module of src/watchdog but the entry: a new one is checked without being listed. */
const DIR = new URL('../../src/watchdog/', import.meta.url);
const PARTS = readdirSync(DIR)
  .filter((file) => file.endsWith('.ts'))
  .map((file) => file.slice(0, -'.ts'.length))
  .filter((name) => name !== ENTRY)
  .sort();

/** A module of src/watchdog by name (a path vite does not see: it is named at run time). */
function load(name: string): Promise<unknown> {
  return import(/* @vite-ignore */ new URL(`${name}.ts`, DIR).pathname);
}

/** The first frame of `stack` outside Node's own code: what created the resource. */
function createdBy(stack: string | undefined): string {
  return (
    (stack ?? '')
      .split('\n')
      .slice(1)
      .find((frame) => !/\(node:|at node:/.test(frame)) ?? ''
  );
}

/**
 * Imports one module afresh (its own imports too): what it made that runs on its own (timers,
 * immediates, sockets, ports, file requests: an unref'd timer too), and what it left running.
 * Promises and next-tick callbacks are the module loader's own, and the test runner's timers its.
 */
async function importAlone(name: string): Promise<{ exports: Record<string, unknown>; made: string[]; left: string[] }> {
  vi.resetModules();
  reads.length = 0;
  const made: string[] = [];
  const hook = createHook({
    init(_id, type) {
      if (type === 'PROMISE' || type === 'TickObject') return;
      // The test runner's own timers are set while a slow import runs: not the module's.
      if (createdBy(new Error().stack).includes('/node_modules/vitest/')) return;
      made.push(type);
    },
  });
  const before = process.getActiveResourcesInfo();
  hook.enable();
  const exports = await load(name).finally(() => hook.disable());
  const after = process.getActiveResourcesInfo();
  // What is running now and was not before (a resource type may run more than once).
  const left = [...after];
  for (const resource of before) {
    const i = left.indexOf(resource);
    if (i !== -1) left.splice(i, 1);
  }
  return { exports: exports as Record<string, unknown>, made, left };
}

describe('the watchdog thread is built of parts that import without side effects', () => {
  it('there are parts to check', () => {
    expect(PARTS).toEqual(
      expect.arrayContaining(['block-detector', 'block-report', 'block-span', 'cpu-counters', 'probe-answers', 'stack-capture']),
    );
  });

  it.each(PARTS)('%s: no timer or handle, no workerData or parentPort read, nothing thrown', async (name) => {
    const { exports, made, left } = await importAlone(name);
    expect(Object.keys(exports).length).toBeGreaterThan(0);
    expect(made).toEqual([]);
    expect(left).toEqual([]);
    expect(reads).toEqual([]);
  });

  it('the entry is where they are read: imported outside a worker it reads workerData, and fails before starting anything', async () => {
    vi.resetModules();
    reads.length = 0;
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    await expect(load(ENTRY)).rejects.toThrow(TypeError);
    expect(reads).toContain('workerData');
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout')).toHaveLength(before);
  });
});
