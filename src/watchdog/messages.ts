import type { RedactionOptions } from '../diagnostics/index.js';
import type { BlockedFrame } from './frames.js';

/** What the watchdog thread is started with. */
export interface WatchdogWorkerData {
  /** One Int32: the main thread's heartbeat counter. */
  readonly heartbeat: SharedArrayBuffer;
  readonly thresholdMs: number;
  readonly pollMs: number;
  readonly minReportIntervalMs: number;
  readonly captureTimeoutMs: number;
  readonly sourceMaps: boolean;
  readonly exportSpans: boolean;
  readonly serviceName: string | undefined;
  readonly redact: RedactionOptions | undefined;
}

/** Sent to the main thread when a block ends. */
export interface BlockMessage {
  readonly type: 'block';
  readonly blockedMs: number;
  /** Epoch ms the block began (within the heartbeat period). */
  readonly startedAt: number;
  /** The blocked stack, innermost first; empty when it was not captured (not reported, or never paused). */
  readonly frames: readonly BlockedFrame[];
  /** Blocked outside JavaScript (sync I/O, a child process waited for): the frames are those of its caller, taken once it returned. */
  readonly native: boolean;
  /** The main thread's kernel wait channel during a block outside JavaScript (Linux). */
  readonly wait?: string;
  /** Whether spans were exported for it (at most one block per `minReportIntervalMs`). */
  readonly reported: boolean;
}
