import type { DiagnosticSnapshot } from '../diagnostics/index.js';
import type { RedactionOptions } from '../redaction/index.js';
import type { HealthStatus, ProbeKind } from '../health/index.js';
import type { ProbeServerOptions } from '../probe/index.js';
import type { BlockedFrame } from './frames.js';

/** Heartbeat slot: the counter the main thread bumps on its timer. */
export const BEAT = 0;
/**
 * Heartbeat slot: 1 while an inspector server is open on the main thread (`--inspect`). A stop may
 * then be a developer's breakpoint, which pausing and resuming the thread would release.
 */
export const INSPECTOR_OPEN = 1;
/**
 * Heartbeat slot: 1 once the app is serving (its first request, the catalog's first round, or its
 * loop idle). A block before that is start-up's (module loading) and spends none of the block budget.
 */
export const STARTED = 2;
/**
 * Byte offset, in the heartbeat buffer, of the epoch µs of the last beat (a `BigInt64Array` slot):
 * a block is measured from the beat, not from when a starved watchdog thread got to see it.
 */
export const BEAT_TIME_OFFSET = 16;
/** Bytes of the heartbeat buffer: the Int32 slots, then the beat's time. */
export const HEARTBEAT_BYTES = BEAT_TIME_OFFSET + BigInt64Array.BYTES_PER_ELEMENT;

/** What the watchdog thread is started with. */
export interface WatchdogWorkerData {
  /** Int32 slots: {@link BEAT}, {@link INSPECTOR_OPEN} and {@link STARTED}; the beat's time at {@link BEAT_TIME_OFFSET}. */
  readonly heartbeat: SharedArrayBuffer;
  readonly thresholdMs: number;
  readonly pollMs: number;
  readonly minReportIntervalMs: number;
  readonly captureTimeoutMs: number;
  readonly sourceMaps: boolean;
  readonly exportSpans: boolean;
  readonly serviceName: string | undefined;
  readonly redact: RedactionOptions | undefined;
  /** The catalog's own component, failed in probe answers while the loop is blocked. */
  readonly selfComponent: string;
  /** Load the probe server at once, while the main thread still loads the SDK. */
  readonly prepareProbes: boolean;
}

/** Probe server options that cross threads: everything but the catalog and the logger. */
export type ServedProbeOptions = Omit<ProbeServerOptions, 'health' | 'logger'>;

/** What the main thread sends the watchdog thread. */
export type ToWatchdog =
  | { readonly type: 'status'; readonly probe: ProbeKind; readonly status: HealthStatus }
  | { readonly type: 'serve'; readonly options: ServedProbeOptions; readonly stallAfterMs: number }
  | { readonly type: 'close-probes' }
  | { readonly type: 'diagnosis'; readonly id: number; readonly snapshot?: DiagnosticSnapshot; readonly error?: string };

/** What the watchdog thread sends the main thread. */
export type FromWatchdog =
  | BlockMessage
  | StarvedMessage
  | { readonly type: 'serving'; readonly port: number; readonly url: string }
  | { readonly type: 'serve-failed'; readonly name: string; readonly code: string | undefined; readonly message: string }
  | { readonly type: 'probes-closed' }
  | { readonly type: 'diagnose'; readonly id: number }
  | { readonly type: 'log'; readonly level: 'warn' | 'info' | 'debug'; readonly fields: object; readonly msg: string };

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
  /** Whether spans were exported for it (at most one block per `minReportIntervalMs`, and one during start-up). */
  readonly reported: boolean;
  /** It began before the app was serving (module loading): it spent none of the block budget. */
  readonly startup: boolean;
  /** Whether the probes served by the thread answered 503 during it (it lasted past the catalog's stall limit). */
  readonly failedProbes: boolean;
  /** The `event loop blocked` span exported when it was detected. */
  readonly span?: { readonly traceId: string; readonly spanId: string };
}

/**
 * Sent to the main thread when the loop runs again after a stall the process was starved of CPU for
 * (stopped, throttled at its CPU limit, a paused VM): not a block, nothing exported, no probe failed.
 */
export interface StarvedMessage {
  readonly type: 'starved';
  /** How long the loop did not run, in ms. */
  readonly stalledMs: number;
  /** How much of it the process (the watchdog thread, or the main thread waiting for a CPU) could not run. */
  readonly starvedMs: number;
  /** CPU the main thread got meanwhile (Linux; undefined elsewhere). */
  readonly mainThreadCpuMs: number | undefined;
  /** Epoch ms the stall began. */
  readonly startedAt: number;
}
