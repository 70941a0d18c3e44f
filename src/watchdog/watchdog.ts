import { trace } from '@opentelemetry/api';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { RedactionOptions } from '../redaction/index.js';
import { errorText, LifelineError, numberOption } from '../errors/index.js';
import { PROBE_KINDS, SELF_COMPONENT, type HealthCatalog, type HealthStatus, type ProbeKind } from '../health/index.js';
import { loggerOrDefault, type Logger } from '../log/index.js';
import { isoTime } from '../semconv/index.js';
import { SETTINGS, settingOption } from '../settings/index.js';
import { startProbeServer, type ProbeServer } from '../probe/index.js';
import { describeFrame, topUserFrame, type BlockedFrame } from './frames.js';
import { beatPeriodMs, startHeartbeat } from './heartbeat.js';
import {
  type BlockMessage,
  type FromWatchdog,
  type ServedProbeOptions,
  type StarvedMessage,
  type ToWatchdog,
  type WatchdogWorkerData,
} from './messages.js';
import { recordStarvation } from './starvation.js';

/** Options of {@link startWatchdog}. */
export interface WatchdogOptions {
  /** The event loop counts as blocked once it has not run for this long. Default 5 000 ms. */
  thresholdMs?: number;
  /**
   * At most one block is reported (captured and exported) per this many ms; others are counted. A
   * block during start-up spends none of it (it has a report of its own). Lines about CPU
   * starvation are said at most as often, the rest counted in the next. Default 60 000.
   */
  minReportIntervalMs?: number;
  /** Export `event loop blocked` spans with the exporters `OTEL_TRACES_EXPORTER` names. Default true. */
  exportSpans?: boolean;
  /** `service.name` of those spans; default from `OTEL_SERVICE_NAME`. */
  serviceName?: string;
  /** Redaction of the stack text and status message (as `RedactionSpanProcessor`'s options). */
  redact?: RedactionOptions;
  /** Where the line about a block goes once the loop runs again. Default: lifeline's pino logger. */
  logger?: Logger;
  /** Called on the main thread once a block has ended. */
  onBlock?: (block: EventLoopBlock) => void;
  /** @internal The thread loads the probe server as it boots: probes will be asked for. */
  prepareProbes?: boolean;
}

/** A block of the event loop, as told to the main thread once it ended. */
export interface EventLoopBlock {
  /** How long the loop did not run, in ms (to within a heartbeat). */
  readonly blockedMs: number;
  /** When it began, epoch ms (as every time a program reads from lifeline). */
  readonly startedAt: number;
  /** The blocked stack, innermost first; empty when it was not captured. */
  readonly frames: readonly BlockedFrame[];
  /** The frame that explains it (the innermost not in Node's own code). */
  readonly top: BlockedFrame | undefined;
  /** That frame as a person reads it: `crunchReport (/app/report.js:8)`. */
  readonly blockedIn: string | undefined;
  /**
   * Whether the probes served by the watchdog thread answered 503 during it: it lasted past both
   * the threshold and the catalog's `stallAfterMs`.
   */
  readonly failedProbes: boolean;
  /** The `event loop blocked` span exported when the block was detected, if one was. */
  readonly span: { readonly traceId: string; readonly spanId: string } | undefined;
  /** Blocked outside JavaScript (sync I/O, a child process waited for); the frames are then its caller's. */
  readonly native: boolean;
  /**
   * It began before the app was serving (its first request, the catalog's first round, or its loop
   * first idle): module loading, say. Reported without spending the one-a-minute budget, once.
   */
  readonly startup: boolean;
  /** `event loop blocked for 12.3 s in crunchReport (app.js:8)`, and ` during start-up` for one then. */
  readonly message: string;
}

/** A running watchdog. */
export interface Watchdog {
  /** How long the event loop must not run to count as blocked, in ms: the option it was started with, default 5 000. */
  readonly thresholdMs: number;
  /**
   * Serves `health`'s probes from the watchdog thread (options as {@link startProbeServer}'s), so
   * they are answered while this thread's event loop is blocked. Once the block is past both the
   * threshold and the catalog's {@link HealthCatalog.stallAfterMs} (when its own `healthcheck` would fail
   * anyway, had the thread been free to answer), `/live` and `/ready` answer 503 with that
   * `healthcheck` unhealthy and an `eventLoop` field (`blockedMs`, `blockedIn`, `frames`). The verdicts are published to that thread on every heartbeat; call
   * {@link Watchdog.publish} after a change that must show at once. Rejects as `startProbeServer` does.
   */
  serveProbes(health: HealthCatalog, options?: ServedProbeOptions): Promise<ProbeServer>;
  /** Publishes the catalog's verdicts to the probe server now (they also go on every heartbeat). */
  publish(): void;
  /** Stops the heartbeat, the probe server and the watchdog thread. Idempotent. */
  close(): Promise<void>;
}

const HOOK = Symbol.for('otel-lifeline.watchdog');

/** The reply of a thread that is gone, to whoever awaits one. */
const THREAD_EXITED = { type: 'serve-failed', name: 'Error', code: 'ERR_WATCHDOG_EXITED', message: 'the watchdog thread exited' } as const;

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
  settingOption(SETTINGS.watchdogThreshold, thresholdMs);
  if (minReportIntervalMs !== Number.POSITIVE_INFINITY)
    numberOption('watchdog.minReportIntervalMs', minReportIntervalMs, { min: 0, unit: 'ms' }); // Infinity: report one block only
  const logger = loggerOrDefault(options.logger);

  // No --import or loader hooks of the app's in this thread: it only watches, serves probes and exports.
  const script = new URL('../watchdog/watchdog-worker.js', import.meta.url);
  // A bundle that left the thread's file behind, or lifeline's sources run as they are.
  if (!existsSync(fileURLToPath(script))) {
    throw new LifelineError(
      'ERR_WATCHDOG_UNAVAILABLE',
      `the watchdog thread's script is missing (${fileURLToPath(script)}): keep otel-lifeline out of bundles`,
    );
  }
  const periodMs = beatPeriodMs(thresholdMs);
  let served: HealthCatalog | undefined;
  let stopPublishing: (() => void) | undefined;
  const published = new Map<ProbeKind, HealthStatus>();
  // Each beat publishes the verdicts too: a probe answered on the thread is at most a beat old.
  const heart = startHeartbeat(periodMs, () => served?.report().some((component) => component.healthy) === true, publish);

  const hook = { activeSpan: activeSpanId };
  (globalThis as Record<symbol, unknown>)[HOOK] = hook;
  const data: WatchdogWorkerData = {
    heartbeat: heart.buffer,
    thresholdMs,
    pollMs: periodMs,
    minReportIntervalMs,
    captureTimeoutMs: 1_000,
    sourceMaps: process.sourceMapsEnabled,
    exportSpans,
    serviceName,
    redact,
    selfComponent: SELF_COMPONENT,
    prepareProbes: options.prepareProbes === true,
  };
  // Nor the preloads of NODE_OPTIONS (APM agents, test-runner hooks), which a worker reads from its env.
  const { NODE_OPTIONS: _preloads, ...env } = process.env;
  const worker = new Worker(script, { workerData: data, execArgv: [], env, resourceLimits: { maxOldGenerationSizeMb: 64 } });
  const send = (message: ToWatchdog): void => {
    worker.postMessage(message);
  };
  const replies = new Set<(message: FromWatchdog) => boolean>();
  let gone = false;
  /** Read through a call: TypeScript would narrow `gone` across an await it cannot see through. */
  const threadGone = (): boolean => gone;
  let closing: Promise<void> | undefined;
  /** Serves the probes on this thread, should the watchdog thread exit while serving them. */
  let takeOver: (() => void) | undefined;
  /** The probes served on this thread once the watchdog thread is gone. */
  let mainProbes: Promise<ProbeServer | undefined> | undefined;
  const closeMainProbes = async (): Promise<void> => {
    const probes = mainProbes;
    mainProbes = undefined;
    await (await probes?.catch(() => undefined))?.close();
  };
  worker.on('message', (message: FromWatchdog) => {
    switch (message.type) {
      case 'block': {
        const block = toBlock(message);
        // While modules load (a compiler, a test runner's transform, an app reading its config) a
        // long block is expected and nobody waits on the process yet: said at debug, still exported.
        logger[block.startup ? 'debug' : 'warn'](
          {
            blockedMs: Math.round(block.blockedMs),
            startedAt: isoTime(block.startedAt), // for a person reading the log
            top: block.blockedIn,
            exported: message.reported,
            ...(block.startup ? { startup: true } : {}),
          },
          `lifeline: ${block.message}`,
        );
        try {
          onBlock?.(block);
        } catch (err) {
          logger.warn({ err: errorText(err) }, 'lifeline: the watchdog onBlock callback threw');
        }
        return;
      }
      case 'starved':
        starved(message);
        return;
      case 'log':
        logger[message.level](message.fields, message.msg);
        return;
      case 'diagnose':
        diagnose(message.id);
        return;
      default:
        for (const reply of replies) if (reply(message)) replies.delete(reply);
    }
  });
  worker.on('error', (err) => {
    logger.warn({ err: String(err) }, 'lifeline: the watchdog thread failed; blocked event loops are not reported');
  });
  // A thread that is gone answers nothing: whoever waits for it is told at once.
  worker.on('exit', (code) => {
    gone = true;
    // Not closed by us (a crash, its heap limit): the probes it served must not go with it, or the
    // kubelet restarts a healthy pod. They are served from this thread again, as without a watchdog.
    if (closing === undefined) {
      heart.stop();
      logger.warn(
        { code },
        `lifeline: the watchdog thread exited; blocked event loops are not reported${takeOver === undefined ? '' : ', and probes are served on the main thread'}`,
      );
      takeOver?.();
    }
    for (const reply of replies) reply(THREAD_EXITED);
    for (const reply of replies) reply({ type: 'probes-closed' });
    replies.clear();
  });
  // After the listeners: adding a 'message' listener refs the worker's port again.
  worker.unref();

  let starvedSaidAt = Number.NEGATIVE_INFINITY;
  let unsaid = 0;
  /** Counted for the metric; said at most once a minute, with how many went unsaid since. */
  function starved(message: StarvedMessage): void {
    recordStarvation(message.stalledMs);
    const now = performance.now();
    if (now - starvedSaidAt < minReportIntervalMs) {
      unsaid++;
      return;
    }
    starvedSaidAt = now;
    logger.warn(
      {
        stalledMs: Math.round(message.stalledMs),
        starvedMs: Math.round(message.starvedMs),
        ...(message.mainThreadCpuMs === undefined ? {} : { mainThreadCpuMs: Math.round(message.mainThreadCpuMs) }),
        startedAt: isoTime(message.startedAt), // for a person reading the log
        ...(unsaid === 0 ? {} : { unsaid }),
      },
      `lifeline: the process got no CPU for ${(message.starvedMs / 1_000).toFixed(1)} s (stopped, paused, or throttled at its CPU limit): the event loop stalled ${(message.stalledMs / 1_000).toFixed(1)} s, starved, not blocked`,
    );
    unsaid = 0;
  }

  function publish(): void {
    if (served === undefined) return;
    for (const probe of PROBE_KINDS) {
      const status = served.status(probe);
      // The catalog hands out the same frozen status until a verdict changes.
      if (published.get(probe) === status) continue;
      published.set(probe, status);
      send({ type: 'status', probe, status: { ok: status.ok, healthy: [...status.healthy], unhealthy: [...status.unhealthy] } });
    }
  }

  function diagnose(id: number): void {
    try {
      const snapshot = served?.diagnose();
      send(
        snapshot === undefined
          ? { type: 'diagnosis', id, error: 'no catalog' }
          : { type: 'diagnosis', id, snapshot: JSON.parse(JSON.stringify(snapshot)) as typeof snapshot },
      );
    } catch (err) {
      send({ type: 'diagnosis', id, error: err instanceof Error ? err.message : 'diagnostics failed' });
    }
  }

  /** The next reply `accept` takes. The thread keeps the process alive meanwhile: an awaited start must not end it. */
  function awaitReply<T>(accept: (message: FromWatchdog) => T | undefined): Promise<T> {
    if (gone) {
      const value = accept(THREAD_EXITED) ?? accept({ type: 'probes-closed' });
      if (value !== undefined) return Promise.resolve(value);
    }
    worker.ref();
    return new Promise<T>((resolve) => {
      replies.add((message) => {
        const value = accept(message);
        if (value === undefined) return false;
        if (replies.size === 1) worker.unref();
        resolve(value);
        return true;
      });
    });
  }

  return {
    thresholdMs,
    async serveProbes(health, options = {}) {
      if (served !== undefined) throw new LifelineError('ERR_ALREADY_STARTED', 'this watchdog already serves probes');
      served = health;
      // A changed verdict reaches the thread at once: a heartbeat later, a probe would read the old one.
      stopPublishing = health.onVerdictChange(publish);
      /** The probes on this thread, as without a watchdog: the thread is gone (a crash, its heap limit). */
      const onThisThread = (port: number | undefined): Promise<ProbeServer> =>
        startProbeServer({ ...options, ...(port === undefined ? {} : { port }), health, logger });
      if (gone) return (mainProbes = onThisThread(undefined));
      publish();
      const answer = awaitReply((message) => (message.type === 'serving' || message.type === 'serve-failed' ? message : undefined));
      send({ type: 'serve', options, stallAfterMs: health.stallAfterMs });
      const reply = await answer;
      if (reply.type === 'serve-failed') {
        if (reply.code === THREAD_EXITED.code) return (mainProbes = onThisThread(undefined));
        served = undefined;
        stopPublishing();
        published.clear();
        throw reply.name === 'LifelineError' && reply.code !== undefined
          ? new LifelineError(reply.code as LifelineError['code'], reply.message)
          : Object.assign(new Error(reply.message), { code: reply.code });
      }
      const takeOverNow = (): void => {
        takeOver = undefined;
        mainProbes = onThisThread(reply.port).catch((err: unknown) => {
          logger.warn({ err: errorText(err), port: reply.port }, 'lifeline: the probes could not be served on the main thread');
          return undefined;
        });
      };
      // The thread may have exited between its answer and this line: its 'exit' found nothing to take over.
      if (threadGone()) takeOverNow();
      else takeOver = takeOverNow;
      let stopping: Promise<void> | undefined;
      return {
        port: reply.port,
        url: reply.url,
        close() {
          stopping ??= (async () => {
            takeOver = undefined;
            if (mainProbes !== undefined) {
              await closeMainProbes();
            } else {
              const closed = awaitReply((message) => (message.type === 'probes-closed' ? true : undefined));
              send({ type: 'close-probes' });
              await closed;
            }
            served = undefined;
            stopPublishing?.();
          })();
          return stopping;
        },
      };
    },
    publish,
    close() {
      closing ??= (async () => {
        takeOver = undefined;
        heart.stop();
        stopPublishing?.();
        await closeMainProbes();
        if ((globalThis as Record<symbol, unknown>)[HOOK] === hook) Reflect.deleteProperty(globalThis, HOOK);
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
    startedAt: Math.round(message.startedAt),
    frames: message.frames,
    top,
    blockedIn: top === undefined ? undefined : describeFrame(top),
    span: message.span,
    failedProbes: message.failedProbes,
    native: message.native,
    startup: message.startup,
    message: `event loop blocked for ${(message.blockedMs / 1_000).toFixed(1)} s${where}${message.startup ? ' during start-up' : ''}`,
  };
}
