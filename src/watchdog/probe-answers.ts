/**
 * The probe server on the watchdog thread, when the main thread hands it over: it answers from the
 * verdicts the main thread publishes, so probes are answered while the main thread's loop is
 * blocked — with 503 and where it is blocked once that lasts past the threshold and the catalog's
 * stall limit.
 */
import type { DiagnosticSnapshot } from '../diagnostics/index.js';
import type { HealthStatus, ProbeKind } from '../health/index.js';
import type { HealthView, ProbeServer } from '../probe/index.js';
import type { Block } from './block-detector.js';
import { describeFrame, stackText, topUserFrame, type BlockedFrame } from './frames.js';
import type { FromWatchdog, ServedProbeOptions, ToWatchdog, WatchdogWorkerData } from './messages.js';

type ProbeConfig = Pick<WatchdogWorkerData, 'thresholdMs' | 'captureTimeoutMs' | 'selfComponent' | 'prepareProbes'>;

/** The probes served on this thread, and the messages of the main thread about them. */
export class ThreadProbes {
  readonly #config: ProbeConfig;
  readonly #tell: (message: FromWatchdog) => void;
  /** The block in progress, if any (the detector's). */
  readonly #block: () => Block | undefined;
  readonly #statuses = new Map<ProbeKind, HealthStatus>();
  readonly #diagnoses = new Map<number, { resolve: (snapshot: DiagnosticSnapshot) => void; reject: (err: Error) => void }>();
  #nextDiagnosis = 0;
  #probes: ProbeServer | undefined;
  /** Probes fail once a block lasts this long: when the catalog's own check would fail too. */
  #failProbesAfterMs: number | undefined;
  /** The probe server's module, once it is being loaded. */
  #probeModule: Promise<typeof import('../probe/index.js')> | undefined;

  constructor(config: ProbeConfig, tell: (message: FromWatchdog) => void, block: () => Block | undefined) {
    this.#config = config;
    this.#tell = tell;
    this.#block = block;
  }

  /** Loads the probe server now, as the thread boots, when probes will be asked for. */
  prepare(): void {
    if (!this.#config.prepareProbes) return;
    this.#probeModule ??= import('../probe/index.js');
    this.#probeModule.catch(() => undefined); // its failure is serve's to report
  }

  /** Whether the probes this thread serves answer 503 after a block this long (of the loop's own time). */
  failsProbes(blockedMs: number): boolean {
    return this.#failProbesAfterMs !== undefined && blockedMs >= this.#failProbesAfterMs;
  }

  receive(message: ToWatchdog): void {
    switch (message.type) {
      case 'status':
        this.#statuses.set(message.probe, message.status);
        break;
      case 'serve':
        this.#failProbesAfterMs = Math.max(this.#config.thresholdMs, message.stallAfterMs);
        void this.#serve(message.options);
        break;
      case 'close-probes':
        void (this.#probes?.close() ?? Promise.resolve()).then(() => {
          this.#tell({ type: 'probes-closed' });
        });
        break;
      case 'diagnosis': {
        const pending = this.#diagnoses.get(message.id);
        this.#diagnoses.delete(message.id);
        if (message.snapshot !== undefined) pending?.resolve(message.snapshot);
        else pending?.reject(new Error(message.error ?? 'diagnostics failed'));
        break;
      }
    }
  }

  /** The main thread's published verdicts; while its loop is blocked past both limits, failing live and ready. */
  readonly health: HealthView = {
    status: (probe) => {
      const published = this.#statuses.get(probe) ?? { ok: true, healthy: [], unhealthy: [] };
      const current = this.#block();
      if (current === undefined || probe === 'startup') return published;
      // A shorter block changes no answer: the catalog would have answered 200 late, not 503. Nor
      // does the time the process was starved of CPU: a restart would not give it any.
      if (!this.failsProbes(current.ownMs)) return published;
      return blockedStatus(published, performance.now() - current.since, current.frames, this.#config.selfComponent);
    },
    diagnose: async () => {
      const { EventLoopBlockedError } = await import('../probe/index.js');
      const block = this.#block();
      if (block !== undefined) throw new EventLoopBlockedError(performance.now() - block.since);
      const id = this.#nextDiagnosis++;
      return new Promise<DiagnosticSnapshot>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.#diagnoses.delete(id);
          reject(new EventLoopBlockedError(this.#config.captureTimeoutMs));
        }, this.#config.captureTimeoutMs);
        this.#diagnoses.set(id, {
          resolve: (snapshot) => {
            clearTimeout(timer);
            resolve(snapshot);
          },
          reject: (err) => {
            clearTimeout(timer);
            reject(err);
          },
        });
        this.#tell({ type: 'diagnose', id });
      });
    },
  };

  async #serve(options: ServedProbeOptions): Promise<void> {
    try {
      this.#probeModule ??= import('../probe/index.js');
      const { startProbeServer } = await this.#probeModule;
      const relay = (level: 'warn' | 'info' | 'debug') => (fields: object, msg: string) => {
        this.#tell({ type: 'log', level, fields, msg });
      };
      this.#probes = await startProbeServer({
        ...options,
        health: this.health,
        logger: { warn: relay('warn'), info: relay('info'), debug: relay('debug') },
      });
      this.#tell({ type: 'serving', port: this.#probes.port, url: this.#probes.url });
    } catch (err) {
      const error = err as NodeJS.ErrnoException;
      this.#tell({ type: 'serve-failed', name: error.name, code: error.code, message: error.message });
    }
  }
}

/** How many frames a probe answer shows: the innermost, enough to say where without a long body. */
const ANSWER_FRAMES = 5;

/** The catalog's own `healthcheck` (which watches that rounds run) failing, with where the loop is stuck. */
export function blockedStatus(
  published: HealthStatus,
  blockedMs: number,
  frames: readonly BlockedFrame[] | undefined,
  selfComponent: string,
): HealthStatus {
  const top = frames === undefined ? undefined : topUserFrame(frames);
  return {
    ok: false,
    healthy: published.healthy.filter((name) => name !== selfComponent),
    unhealthy: [...new Set([...published.unhealthy, selfComponent])].sort(),
    eventLoop: {
      blockedMs: Math.round(blockedMs),
      ...(top === undefined ? {} : { blockedIn: describeFrame(top) }),
      ...(frames === undefined
        ? {}
        : {
            frames: stackText(frames.slice(0, ANSWER_FRAMES))
              .split('\n')
              // `    at fn (file:line:column)` → `fn (file:line:column)`
              .map((line) => line.trim().slice(3)),
          }),
    },
  };
}
