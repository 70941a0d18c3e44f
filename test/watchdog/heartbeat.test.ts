import { channel } from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { heartbeatOf } from '../../src/watchdog/block-detector.js';
import { beatPeriodMs, startHeartbeat, type Heart } from '../../src/watchdog/heartbeat.js';

// The main thread's heartbeat, read back as the watchdog thread reads it: real timers, short periods.
const hearts: Heart[] = [];
afterEach(() => {
  for (const heart of hearts.splice(0)) heart.stop();
});

function beating(periodMs: number, anyHealthy: () => boolean = () => false) {
  let beats = 0;
  const heart = startHeartbeat(periodMs, anyHealthy, () => beats++);
  hearts.push(heart);
  return { heart, read: heartbeatOf(heart.buffer), onBeats: () => beats };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Keeps the loop busy (never idle, still running timers) for `ms`, or until `done`. */
async function busy(ms: number, done = () => false): Promise<void> {
  const end = performance.now() + ms;
  while (performance.now() < end && !done()) await new Promise((resolve) => setImmediate(resolve));
}

describe('the heartbeat, as the watchdog thread reads it', () => {
  it('a beat every quarter threshold, at least 5 ms and at most 250 ms apart', () => {
    expect([beatPeriodMs(10), beatPeriodMs(300), beatPeriodMs(5_000)]).toEqual([5, 75, 250]);
  });

  it("counts beats, with the time of the last on the reader's clock, and calls onBeat after each; stop ends them", async () => {
    const { heart, read, onBeats } = beating(10);
    expect(read.count()).toBe(0);
    const start = performance.now();
    await sleep(100);
    const count = read.count();
    expect(count).toBeGreaterThanOrEqual(3);
    expect(read.lastBeatAt()).toBeGreaterThanOrEqual(start);
    expect(read.lastBeatAt()).toBeLessThanOrEqual(performance.now() + 1); // µs rounding
    expect(onBeats()).toBeGreaterThanOrEqual(count - 1);
    expect(read.inspectorOpen()).toBe(false); // no --inspect here
    heart.stop();
    await sleep(50);
    expect(read.count()).toBe(count);
  });

  it('start-up ends with the first request the app takes, beat or not', () => {
    const { read } = beating(60_000);
    expect(read.started()).toBe(false);
    channel('http.server.request.start').publish({});
    expect(read.started()).toBe(true);
  });

  it('start-up ends once a component of the catalog is healthy, not before, however busy the loop', async () => {
    let healthy = false;
    const { read } = beating(10, () => healthy);
    await busy(100);
    expect(read.started()).toBe(false);
    healthy = true;
    await busy(2_000, read.started); // at the next beat; a loaded machine may delay it
    expect(read.started()).toBe(true);
  });

  it('start-up ends once the loop was idle for half a beat: the app waits for work', async () => {
    const { read } = beating(10);
    await busy(100);
    expect(read.started()).toBe(false);
    for (let i = 0; i < 40 && !read.started(); i++) await sleep(50);
    expect(read.started()).toBe(true);
  });

  it('stopped, a request does not end start-up any more: it no longer listens', () => {
    const { heart, read } = beating(60_000);
    heart.stop();
    channel('http.server.request.start').publish({});
    expect(read.started()).toBe(false);
  });
});
