/**
 * The report of one block: as it is detected, its stack is captured and a span exported at once
 * (the process may be killed before its loop comes back); once it ended, the main thread is told
 * and the whole block exported.
 */
import type { Link } from '@opentelemetry/api';
import type { Block, BlockStart } from './block-detector.js';
import type { BlockReport } from './block-span.js';
import type { FromWatchdog } from './messages.js';
import type { Capture, CaptureStart } from './stack-capture.js';

/** What was found and exported when a reported block was detected. */
export interface Reported {
  /** The capture, when it landed within the capture timeout; else the block is outside JavaScript. */
  readonly first: Capture | undefined;
  /** The capture whenever it lands: for a block in native code, once JavaScript runs again. */
  readonly landed: Promise<Capture | undefined>;
  /** The kernel's wait channel of the main thread (Linux), when the block is outside JavaScript. */
  readonly wait: string | undefined;
  /** Why the stack was not read, when it was not even tried (no inspector, or a debugger's). */
  readonly unread: string | undefined;
  /** Blocked outside JavaScript: the pause did not land within the capture timeout. */
  readonly native: boolean;
  /** The span exported at detection (for the final span's link); settles once exported. */
  readonly detectionSpan: Promise<Link['context'] | undefined>;
}

/** What a report is made with: the thread's other parts. */
export interface ReportParts {
  /** Starts reading where the main thread is. */
  readonly capture: () => CaptureStart;
  /** The main thread's kernel wait, for a block outside JavaScript. */
  readonly waitChannel: () => string | undefined;
  readonly exportSpan: (report: BlockReport) => Promise<Link['context'] | undefined>;
  readonly tell: (message: FromWatchdog) => void;
  /** The block in progress, if any: the frames are set on it for probe answers. */
  readonly block: () => Block | undefined;
  readonly failsProbes: (ownMs: number) => boolean;
  readonly runnableFor: (ms: number) => Promise<void>;
  readonly captureTimeoutMs: number;
  readonly log: (message: string) => void;
}

export class BlockReporter {
  readonly #parts: ReportParts;

  constructor(parts: ReportParts) {
    this.#parts = parts;
  }

  /** Captures the stack and exports what is known at once. */
  async detected({ startedAt, blockedMs, startup }: BlockStart): Promise<Reported> {
    const parts = this.#parts;
    const { first, landed, unread } = parts.capture();
    const firstCapture = await first;
    // Probes show where the loop is stuck at once, not after the export (slow or hung collector).
    const block = parts.block();
    if (block !== undefined && block.startedAt === startedAt) block.frames = firstCapture?.frames;
    const native = firstCapture === undefined && unread === undefined;
    const wait = native ? parts.waitChannel() : undefined;
    const detectionSpan = parts
      .exportSpan({
        startedAt,
        endedAt: Date.now(),
        blockedMs: Math.max(blockedMs, Date.now() - startedAt),
        ongoing: true,
        startup,
        native,
        unread,
        capture: firstCapture,
        wait,
        link: undefined,
      })
      .catch((err: unknown) => {
        parts.log(`lifeline: the event loop is blocked, and exporting its span failed: ${String(err)}`);
        return undefined;
      });
    return { first: firstCapture, landed, wait, unread, native, detectionSpan };
  }

  /** Tells the main thread of a block that ended `now` (this thread's clock), and exports it when it was reported. */
  ended(block: Block<Promise<Reported>>, now: number): void {
    const parts = this.#parts;
    const blockedMs = now - block.since;
    const failedProbes = parts.failsProbes(block.ownMs);
    const report = block.report;
    if (report === undefined) {
      parts.tell({
        type: 'block',
        blockedMs,
        startedAt: block.startedAt,
        frames: [],
        native: false,
        reported: false,
        startup: block.startup,
        failedProbes,
      });
      return;
    }
    void report
      .then(async ({ first, landed, wait, unread, native, detectionSpan }) => {
        // Outside JavaScript, the pause lands as soon as JavaScript runs again: in the caller of the native call.
        const capture = first ?? (await Promise.race([landed, parts.runnableFor(parts.captureTimeoutMs).then(() => undefined)]));
        // The main thread's verdict links to the span exported at detection, when that export is done.
        const span = await Promise.race([detectionSpan, parts.runnableFor(parts.captureTimeoutMs).then(() => undefined)]);
        parts.tell({
          type: 'block',
          blockedMs,
          startedAt: block.startedAt,
          frames: capture?.frames ?? [],
          native,
          reported: true,
          startup: block.startup,
          failedProbes,
          ...(wait === undefined ? {} : { wait }),
          ...(span === undefined ? {} : { span: { traceId: span.traceId, spanId: span.spanId } }),
        });
        try {
          await parts.exportSpan({
            startedAt: block.startedAt,
            endedAt: block.startedAt + blockedMs,
            blockedMs,
            ongoing: false,
            startup: block.startup,
            native,
            unread,
            capture,
            wait,
            link: await detectionSpan,
          });
        } catch (err) {
          parts.log(`lifeline: exporting the span of an event loop block failed: ${String(err)}`);
        }
      })
      .catch((err: unknown) => {
        parts.log(`lifeline: reporting an event loop block failed: ${String(err)}`); // never an unhandled rejection that ends this thread
      });
  }
}
