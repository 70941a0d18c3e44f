import { trace } from '@opentelemetry/api';
import { Worker } from 'node:worker_threads';
import type { RedactionOptions } from '../diagnostics/index.js';
import { invalidOption } from '../errors/index.js';
import { loggerOrDefault, type Logger } from '../log/index.js';
import { describeFrame, topUserFrame, type BlockedFrame } from './frames.js';
import type { BlockMessage, WatchdogWorkerData } from './messages.js';

/** Options of {@link startWatchdog}. */
export interface WatchdogOptions {
  /** The event loop counts as blocked once it has not run for this long. Default 5 000 ms. */
  thresholdMs?: number;
  /** At most one block is reported (captured and exported) per this many ms; others are counted. Default 60 000. */
  minReportIntervalMs?: number;
  /** Export `event loop blocked` spans with the exporters `OTEL_TRACES_EXPORTER` names. Default true. */
  exportSpans?: boolean;
  /** `service.name` of those spans; default from `OTEL_SERVICE_NAME`. */
  serviceName?: string;
  /** Redaction of the stack text and status message (as the in-flight processor's `redact`). */
  redact?: RedactionOptions;
  /** Where the line about a block goes once the loop runs again. Default: lifeline's pino logger. */
  logger?: Logger;
  /** Called on the main thread once a block has ended. */
  onBlock?: (block: EventLoopBlock) => void;
}

/** A block of the event loop, as told to the main thread once it ended. */
export interface EventLoopBlock {
  /** How long the loop did not run, in ms (to within a heartbeat). */
  readonly blockedMs: number;
  /** When it began, as an ISO time. */
  readonly startedAt: string;
  /** The blocked stack, innermost first; empty when it was not captured. */
  readonly frames: readonly BlockedFrame[];
  /** The frame that explains it (the innermost not in Node's own code). */
  readonly top: BlockedFrame | undefined;
  /** Blocked outside JavaScript (sync I/O, a child process waited for); the frames are then its caller's. */
  readonly native: boolean;
  /** `event loop blocked for 12.3 s in crunchReport (app.js:8)`. */
  readonly message: string;
}

/** A running watchdog. */
export interface Watchdog {
  readonly thresholdMs: number;
  /** Stops the heartbeat and the watchdog thread. Idempotent. */
  close(): Promise<void>;
}

const HOOK = Symbol.for('otel-lifeline.watchdog');

/**
 * Starts a watchdog thread for the event loop of this (the main) thread. This thread bumps a
 * counter in shared memory on a timer; when the counter stands still for `thresholdMs`, the
 * watchdog thread captures this thread's JavaScript stack through the inspector and exports an
 * `event loop blocked` span at once (status ERROR, the top frame as `code.*` attributes, the stack
 * as an event, a link to the trace active when it blocked), and another with the whole duration
 * once the loop runs again; then `onBlock` is called here and one line is logged. Neither thread
 * keeps the process alive.
 *
 * @example
 * ```ts
 * import { startWatchdog } from 'otel-lifeline';
 *
 * const watchdog = startWatchdog({ thresholdMs: 2_000 });
 * // a synchronous loop of 3 s → a span "event loop blocked for 3.0 s in crunchReport (app.js:8)"
 * ```
 */
export function startWatchdog(options: WatchdogOptions = {}): Watchdog {
  const { thresholdMs = 5_000, minReportIntervalMs = 60_000, exportSpans = true, serviceName, redact, onBlock } = options;
  if (typeof thresholdMs !== 'number' || !Number.isFinite(thresholdMs) || thresholdMs < 10) throw invalidOption('watchdog.thresholdMs', thresholdMs, 'a number of ms ≥ 10');
  if (typeof minReportIntervalMs !== 'number' || !(minReportIntervalMs >= 0)) throw invalidOption('watchdog.minReportIntervalMs', minReportIntervalMs, 'a number of ms ≥ 0');
  const logger = loggerOrDefault(options.logger);

  // A beat every quarter threshold (at most 250 ms): a block is seen within 1¼ thresholds.
  const periodMs = Math.max(5, Math.min(250, thresholdMs / 4));
  const heartbeat = new SharedArrayBuffer(4);
  const beats = new Int32Array(heartbeat);
  const beat = setInterval(() => Atomics.add(beats, 0, 1), periodMs).unref();

  (globalThis as Record<symbol, unknown>)[HOOK] = { activeSpan: activeSpanId };
  const data: WatchdogWorkerData = {
    heartbeat,
    thresholdMs,
    pollMs: periodMs,
    minReportIntervalMs,
    captureTimeoutMs: 1_000,
    sourceMaps: process.sourceMapsEnabled,
    exportSpans,
    serviceName,
    redact,
  };
  // No --import or loader hooks of the app's in this thread: it only watches and exports.
  const worker = new Worker(new URL('./watchdog-worker.js', import.meta.url), { workerData: data, execArgv: [], resourceLimits: { maxOldGenerationSizeMb: 64 } });
  worker.unref();
  worker.on('message', (message: BlockMessage) => {
    const block = toBlock(message);
    logger.warn({ blockedMs: Math.round(block.blockedMs), startedAt: block.startedAt, top: block.top === undefined ? undefined : describeFrame(block.top), exported: message.reported }, `lifeline: ${block.message}`);
    onBlock?.(block);
  });
  worker.on('error', (err) => {
    logger.warn({ err: String(err) }, 'lifeline: the watchdog thread failed; blocked event loops are not reported');
  });

  let closing: Promise<void> | undefined;
  return {
    thresholdMs,
    close() {
      closing ??= (async () => {
        clearInterval(beat);
        await worker.terminate();
      })();
      return closing;
    },
  };
}

/** `traceId-spanId` of the span active where the main thread is paused; read by the watchdog thread. */
function activeSpanId(): string {
  const context = trace.getActiveSpan()?.spanContext();
  return context === undefined ? '' : `${context.traceId}-${context.spanId}`;
}

function toBlock(message: BlockMessage): EventLoopBlock {
  const top = topUserFrame(message.frames);
  const where = top !== undefined ? ` in ${describeFrame(top)}` : message.native ? ' outside JavaScript' : '';
  return {
    blockedMs: message.blockedMs,
    startedAt: new Date(message.startedAt).toISOString(),
    frames: message.frames,
    top,
    native: message.native,
    message: `event loop blocked for ${(message.blockedMs / 1_000).toFixed(1)} s${where}`,
  };
}
