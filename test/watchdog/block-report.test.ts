import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import type { Block } from '../../src/watchdog/block-detector.js';
import { BlockReporter, type ReportParts, type Reported } from '../../src/watchdog/block-report.js';
import { exportBlockSpan, type BlockReport } from '../../src/watchdog/block-span.js';
import type { BlockedFrame } from '../../src/watchdog/frames.js';
import type { BlockMessage, FromWatchdog } from '../../src/watchdog/messages.js';
import type { Capture, CaptureStart } from '../../src/watchdog/stack-capture.js';

// A block's report through its real span export (to memory); the capture is given as the
// inspector would land it, since only a worker thread can pause the main thread.
const crunch: BlockedFrame = { function: 'crunchReport', file: '/app/report.js', line: 8, column: 3 };
const STARTED_AT = Date.now() - 500;

function reporter(capture: () => CaptureStart, overrides: Partial<ReportParts> = {}) {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] });
  const sink = { tracer: provider.getTracer('lifeline'), flush: () => provider.forceFlush(), redact: (text: string) => text };
  const told: FromWatchdog[] = [];
  const said: string[] = [];
  const exported: BlockReport[] = [];
  let current: Block | undefined;
  const parts: ReportParts = {
    capture,
    waitChannel: () => 'pipe_read (syscall 0)',
    exportSpan: (report) => {
      exported.push(report);
      return exportBlockSpan(sink, report);
    },
    tell: (message) => told.push(message),
    block: () => current,
    failsProbes: (ownMs) => ownMs >= 1_000,
    runnableFor: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    captureTimeoutMs: 100,
    log: (message) => said.push(message),
    ...overrides,
  };
  const blockOf = (report: Promise<Reported> | undefined, ownMs = 500): Block<Promise<Reported>> => ({
    since: performance.now() - 500,
    startedAt: STARTED_AT,
    report,
    startup: false,
    starvedMs: 0,
    ownMs,
  });
  return {
    reports: new BlockReporter(parts),
    memory,
    told,
    said,
    exported,
    blockOf,
    setCurrent: (block: Block | undefined) => (current = block),
  };
}

const landed = (capture: Capture | undefined): CaptureStart => ({ first: Promise.resolve(capture), landed: Promise.resolve(capture) });
const blockMessages = (told: FromWatchdog[]) => told.filter((m): m is BlockMessage => m.type === 'block');
const until = async (what: () => boolean) => {
  for (let i = 0; i < 200 && !what(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
};

describe('BlockReporter', () => {
  it('a block the rate limit only counted: told once it ended, nothing captured or exported', () => {
    const { reports, told, exported, blockOf } = reporter(() => {
      throw new Error('not captured');
    });
    reports.ended(blockOf(undefined, 1_200), performance.now());
    expect(told).toEqual([
      {
        type: 'block',
        blockedMs: expect.closeTo(500, -1),
        startedAt: STARTED_AT,
        frames: [],
        native: false,
        reported: false,
        startup: false,
        failedProbes: true,
      },
    ]);
    expect(exported).toEqual([]);
  });

  it('a block in JavaScript: its frames shown to probes at once, a span at detection, the whole block linked to it once ended', async () => {
    const frames = [crunch];
    const { reports, told, memory, blockOf, setCurrent } = reporter(() => landed({ frames, active: undefined }));
    const report = reports.detected({ startedAt: STARTED_AT, blockedMs: 500, startup: false });
    const block = blockOf(report);
    setCurrent(block);
    const { native, detectionSpan, wait } = await report;
    expect([native, wait, block.frames]).toEqual([false, undefined, frames]);
    const detected = await detectionSpan;
    const [first] = memory.getFinishedSpans();
    expect(first?.attributes['lifeline.event_loop.ongoing']).toBe(true);
    expect(first?.spanContext()).toEqual(detected);

    reports.ended(block, performance.now());
    await until(() => memory.getFinishedSpans().length === 2);
    const [message] = blockMessages(told);
    expect(message).toMatchObject({
      reported: true,
      native: false,
      frames,
      span: { traceId: detected?.traceId, spanId: detected?.spanId },
    });
    const final = memory.getFinishedSpans()[1];
    expect(final?.attributes['lifeline.event_loop.ongoing']).toBe(false);
    expect(final?.links.map((l) => [l.context.spanId, l.attributes?.['lifeline.link']])).toEqual([[detected?.spanId, 'detected']]);
  });

  it('frames that land once the block was over are not shown on the next one', async () => {
    const { reports, blockOf, setCurrent } = reporter(() => landed({ frames: [crunch], active: undefined }));
    const report = reports.detected({ startedAt: STARTED_AT, blockedMs: 500, startup: false });
    const next = { ...blockOf(undefined), startedAt: STARTED_AT + 1_000 };
    setCurrent(next);
    await report;
    expect(next.frames).toBeUndefined();
  });

  it("a block outside JavaScript: the kernel's wait read at detection; the frames of its caller, once the pause lands", async () => {
    let land: (capture: Capture) => void = () => undefined;
    // The pause did not land within the capture timeout; it lands once JavaScript runs again.
    const later = new Promise<Capture>((resolve) => (land = resolve));
    const { reports, told, exported, blockOf } = reporter(() => ({ first: Promise.resolve(undefined), landed: later }), {
      captureTimeoutMs: 5_000,
    });
    const report = reports.detected({ startedAt: STARTED_AT, blockedMs: 500, startup: true });
    reports.ended(blockOf(report), performance.now());
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(blockMessages(told)).toEqual([]); // waiting for the pause
    land({ frames: [crunch], active: undefined });
    await until(() => blockMessages(told).length === 1);
    expect(blockMessages(told)[0]).toMatchObject({ native: true, wait: 'pipe_read (syscall 0)', frames: [crunch] });
    expect(exported[0]).toMatchObject({ native: true, wait: 'pipe_read (syscall 0)', capture: undefined, startup: true });
    await until(() => exported.length === 2);
    expect(exported[1]).toMatchObject({ ongoing: false, native: true, capture: { frames: [crunch] } });
  });

  it('a failed export is said on stderr; the main thread is still told', async () => {
    const { reports, told, said, blockOf } = reporter(() => landed(undefined), {
      exportSpan: () => Promise.reject(new Error('collector down')),
      captureTimeoutMs: 10,
    });
    const report = reports.detected({ startedAt: STARTED_AT, blockedMs: 500, startup: false });
    reports.ended(blockOf(report), performance.now());
    await until(() => said.length === 2);
    expect(said).toEqual([
      'lifeline: the event loop is blocked, and exporting its span failed: Error: collector down',
      'lifeline: exporting the span of an event loop block failed: Error: collector down',
    ]);
    expect(blockMessages(told)).toMatchObject([{ reported: true, native: true }]);
    expect(blockMessages(told)[0]?.span).toBeUndefined();
  });
});
