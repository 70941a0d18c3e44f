import { SpanStatusCode } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { BlockSpans, blockLinks, blockStatusMessage, exportBlockSpan, type BlockReport } from '../../src/watchdog/block-span.js';
import type { BlockedFrame } from '../../src/watchdog/frames.js';

const crunch: BlockedFrame = { function: 'crunchReport', file: '/app/secret/report.js', line: 8, column: 3 };
const internal: BlockedFrame = { function: 'readFileSync', file: 'node:fs', line: 441, column: 20 };
const active = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' };

function report(overrides: Partial<BlockReport> = {}): BlockReport {
  return {
    startedAt: 1_700_000_000_000,
    endedAt: 1_700_000_001_500,
    blockedMs: 1_500,
    ongoing: true,
    native: false,
    startup: false,
    unread: undefined,
    capture: undefined,
    wait: undefined,
    link: undefined,
    ...overrides,
  };
}

describe('blockStatusMessage: what the status of a block span says', () => {
  it.each([
    ['its top frame', report(), crunch, 'event loop blocked for 1.5 s in crunchReport (/app/secret/report.js:8)'],
    [
      'over, to a tenth of a second',
      report({ ongoing: false, blockedMs: 12_345 }),
      crunch,
      'event loop was blocked for 12.3 s in crunchReport (/app/secret/report.js:8)',
    ],
    [
      'why the stack was not read',
      report({ unread: 'an inspector is open', wait: 'pipe_read' }),
      undefined,
      'event loop blocked for 1.5 s (stack not read: an inspector is open)',
    ],
    [
      'the kernel wait of a native block',
      report({ native: true, wait: 'pipe_read (syscall 0)' }),
      undefined,
      'event loop blocked for 1.5 s outside JavaScript (pipe_read (syscall 0))',
    ],
    ['nothing known', report(), undefined, 'event loop blocked for 1.5 s'],
  ])('%s', (_, given, top, said) => {
    expect(blockStatusMessage(given, top)).toBe(said);
  });
});

describe('blockLinks', () => {
  it('the trace active when the loop blocked (sampled), then the span exported at detection', () => {
    const detected = { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 };
    expect(blockLinks(report({ capture: { frames: [], active }, link: detected }))).toEqual([
      { context: { ...active, traceFlags: 1 }, attributes: { 'lifeline.link': 'active when blocked' } },
      { context: detected, attributes: { 'lifeline.link': 'detected' } },
    ]);
    expect(blockLinks(report())).toEqual([]);
  });
});

describe('exportBlockSpan: one `event loop blocked` span', () => {
  function sink() {
    const memory = new InMemorySpanExporter();
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] });
    const flushed: number[] = [];
    return {
      memory,
      sink: {
        tracer: provider.getTracer('lifeline'),
        flush: async () => {
          flushed.push(memory.getFinishedSpans().length);
          await provider.forceFlush();
        },
        redact: (text: string) => text.replaceAll('secret', '[redacted]'),
      },
      flushed,
    };
  }

  it('a root span over the block, status ERROR, the top user frame as code.*, the stack (redacted) as an event, flushed', async () => {
    const { memory, sink: to, flushed } = sink();
    const context = await exportBlockSpan(to, report({ startup: true, capture: { frames: [internal, crunch], active } }));
    const [span] = memory.getFinishedSpans();
    expect(span?.name).toBe('event loop blocked');
    expect(span?.parentSpanContext).toBeUndefined();
    expect(span?.spanContext()).toEqual(context);
    expect(span?.startTime).toEqual([1_700_000_000, 0]);
    expect(span?.endTime).toEqual([1_700_000_001, 500_000_000]);
    expect(span?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: 'event loop blocked for 1.5 s in crunchReport (/app/[redacted]/report.js:8)',
    });
    expect(span?.attributes).toEqual({
      'lifeline.event_loop.blocked_ms': 1_500,
      'lifeline.event_loop.ongoing': true,
      'lifeline.event_loop.native': false,
      'lifeline.event_loop.startup': true,
      'code.function.name': 'crunchReport',
      'code.file.path': '/app/secret/report.js',
      'code.line.number': 8,
      'code.column.number': 3,
    });
    expect(span?.events.map((e) => [e.name, e.attributes])).toEqual([
      [
        'event loop blocked',
        { 'code.stacktrace': '    at readFileSync (node:fs:441:20)\n    at crunchReport (/app/[redacted]/report.js:8:3)' },
      ],
    ]);
    expect(span?.links.map((l) => l.context)).toEqual([{ ...active, traceFlags: 1 }]);
    expect(flushed).toEqual([1]);
  });

  it('a native block: its wait, no frames, no stack event; an anonymous top frame is named so', async () => {
    const { memory, sink: to } = sink();
    await exportBlockSpan(to, report({ native: true, wait: 'pipe_read (syscall 0)', ongoing: false }));
    await exportBlockSpan(to, report({ capture: { frames: [{ ...crunch, function: '' }], active: undefined } }));
    const [native, anonymous] = memory.getFinishedSpans();
    expect(native?.attributes).toEqual({
      'lifeline.event_loop.blocked_ms': 1_500,
      'lifeline.event_loop.ongoing': false,
      'lifeline.event_loop.native': true,
      'lifeline.event_loop.wait': 'pipe_read (syscall 0)',
    });
    expect(native?.events).toEqual([]);
    expect(anonymous?.attributes['code.function.name']).toBe('<anonymous>');
  });
});

describe('BlockSpans: the thread exports only where exporters are configured', () => {
  it('no span, and nothing said, when spans are not exported', async () => {
    const said: string[] = [];
    const spans = new BlockSpans({ exportSpans: false, serviceName: undefined, redact: undefined }, (message) => said.push(message));
    expect(await spans.export(report())).toBeUndefined();
    expect(said).toEqual([]);
  });
});
