/**
 * The main thread's side of the heartbeat the watchdog thread watches: a counter in shared memory
 * bumped on a timer (a timer that does not fire is a loop that does not run), the time of the
 * beat, whether an inspector is open, and when start-up ended.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { BEAT, BEAT_TIME_OFFSET, HEARTBEAT_BYTES, INSPECTOR_OPEN, STARTED } from './messages.js';

/** The longest start-up (module loading, warm-up) before a block is the app's own, whatever else says so. */
const STARTUP_MAX_MS = 60_000;
/** Published by node:http as a server takes each request. */
const REQUEST_START = 'http.server.request.start';

/** The open inspector server's URL; a Node built without the inspector has none. */
const inspectorUrl = ((): (() => string | undefined) => {
  try {
    return (createRequire(import.meta.url)('node:inspector') as typeof import('node:inspector')).url;
  } catch {
    return () => undefined;
  }
})();

/** A beat every quarter threshold (at most 250 ms): a block is seen within 1¼ thresholds. */
export function beatPeriodMs(thresholdMs: number): number {
  return Math.max(5, Math.min(250, thresholdMs / 4));
}

export interface Heart {
  /** The buffer the watchdog thread reads (`heartbeatOf`). */
  readonly buffer: SharedArrayBuffer;
  /** Stops beating. Idempotent. */
  stop(): void;
}

/**
 * Starts beating every `periodMs`. `anyHealthy`: whether a component of the served catalog is
 * healthy (start-up is over); `onBeat`: called after each beat's turn of timers.
 */
export function startHeartbeat(periodMs: number, anyHealthy: () => boolean, onBeat: () => void): Heart {
  const buffer = new SharedArrayBuffer(HEARTBEAT_BYTES);
  const beats = new Int32Array(buffer, 0, BEAT_TIME_OFFSET / Int32Array.BYTES_PER_ELEMENT);
  const beatTime = new BigInt64Array(buffer, BEAT_TIME_OFFSET, 1);
  const noteInspector = (): void => {
    Atomics.store(beats, INSPECTOR_OPEN, inspectorUrl() === undefined ? 0 : 1);
  };
  // Before the thread starts: `--inspect-brk` may stop this thread before its first beat.
  noteInspector();
  // Start-up ends once the app serves: its first request, the catalog's first round (a component
  // turned healthy), or its loop idle for half a beat (it waits for work: done starting).
  let startingUp = true;
  const started = (): void => {
    if (!startingUp) return;
    startingUp = false;
    Atomics.store(beats, STARTED, 1);
    unsubscribe(REQUEST_START, started);
  };
  subscribe(REQUEST_START, started);
  let loop = performance.eventLoopUtilization();
  // A busy process that serves no HTTP and has no component (a queue consumer) is never idle for
  // half a beat: its start-up ends after a minute all the same, or its blocks would be start-up's.
  const startupEnds = performance.now() + STARTUP_MAX_MS;
  const beat = setInterval(() => {
    Atomics.store(beatTime, 0, BigInt(Math.round((performance.timeOrigin + performance.now()) * 1_000)));
    Atomics.add(beats, BEAT, 1);
    noteInspector();
    if (startingUp) {
      const now = performance.eventLoopUtilization();
      if (now.idle - loop.idle >= periodMs / 2 || anyHealthy() || performance.now() >= startupEnds) started();
      loop = now;
    }
    // After this turn's timers: when the process was stopped past the catalog's stall limit, its
    // round is overdue too and runs first, so the verdict published is not "rounds stalled".
    setImmediate(onBeat).unref();
  }, periodMs).unref();
  return {
    buffer,
    stop() {
      clearInterval(beat);
      unsubscribe(REQUEST_START, started);
    },
  };
}
