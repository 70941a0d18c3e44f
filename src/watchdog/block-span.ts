/**
 * The `event loop blocked` spans of a block: one exported as it is detected (the process may be
 * killed before its loop comes back), one with the whole block once it ended. The SDK is loaded
 * with the first one: a healthy service never loads it on this thread.
 */
import type { Link, Tracer } from '@opentelemetry/api';
import type { WatchdogWorkerData } from './messages.js';
import { describeFrame, stackText, topUserFrame, type BlockedFrame } from './frames.js';
import type { Capture } from './stack-capture.js';

/** What one span tells of a block. */
export interface BlockReport {
  startedAt: number;
  endedAt: number;
  blockedMs: number;
  ongoing: boolean;
  /** Blocked outside JavaScript: the inspector could not pause it within the capture timeout. */
  native: boolean;
  /** Began before the app was serving. */
  startup: boolean;
  /** Why the stack was not read, if it was not tried. */
  unread: string | undefined;
  capture: Capture | undefined;
  wait: string | undefined;
  link: Link['context'] | undefined;
}

/** Where spans go, and how their text is redacted. */
export interface SpanSink {
  readonly tracer: Tracer;
  readonly flush: () => Promise<void>;
  readonly redact: (text: string) => string;
}

type Semconv = typeof import('../semconv/index.js');

/** `event loop blocked for 1.5 s in crunchReport (/app/report.js:8)`, or what is known of where. */
export function blockStatusMessage(report: BlockReport, top: BlockedFrame | undefined): string {
  const seconds = (report.blockedMs / 1_000).toFixed(1);
  const where =
    top !== undefined
      ? ` in ${describeFrame(top)}`
      : report.unread !== undefined
        ? ` (stack not read: ${report.unread})`
        : report.wait !== undefined
          ? ` outside JavaScript (${report.wait})`
          : '';
  return `event loop ${report.ongoing ? 'blocked for' : 'was blocked for'} ${seconds} s${where}`;
}

/** The trace active when the loop blocked, and the span exported at detection (on the final span). */
export function blockLinks(report: BlockReport): Link[] {
  const links: Link[] = [];
  if (report.capture?.active !== undefined)
    links.push({ context: { ...report.capture.active, traceFlags: 1 }, attributes: { 'lifeline.link': 'active when blocked' } });
  if (report.link !== undefined) links.push({ context: report.link, attributes: { 'lifeline.link': 'detected' } });
  return links;
}

/** Exports one `event loop blocked` span to `sink`; returns its context (for the final span's link). */
export async function exportBlockSpan(sink: SpanSink, report: BlockReport): Promise<Link['context']> {
  const [{ SpanStatusCode }, semconv] = await Promise.all([import('@opentelemetry/api'), import('../semconv/index.js')]);
  const frames = report.capture?.frames ?? [];
  const top = topUserFrame(frames);
  const span = sink.tracer.startSpan(semconv.SPAN_EVENT_LOOP_BLOCKED, {
    root: true,
    startTime: report.startedAt,
    links: blockLinks(report),
    attributes: blockAttributes(semconv, report, top),
  });
  if (frames.length > 0) span.addEvent(semconv.SPAN_EVENT_LOOP_BLOCKED, { 'code.stacktrace': sink.redact(stackText(frames)) });
  span.setStatus({ code: SpanStatusCode.ERROR, message: sink.redact(blockStatusMessage(report, top)) });
  span.end(report.endedAt);
  await sink.flush();
  return span.spanContext();
}

function blockAttributes(semconv: Semconv, report: BlockReport, top: BlockedFrame | undefined): Record<string, string | number | boolean> {
  return {
    [semconv.ATTR_EVENT_LOOP_BLOCKED_MS]: Math.round(report.blockedMs),
    [semconv.ATTR_EVENT_LOOP_ONGOING]: report.ongoing,
    [semconv.ATTR_EVENT_LOOP_NATIVE]: report.native,
    ...(report.startup ? { [semconv.ATTR_EVENT_LOOP_STARTUP]: true } : {}),
    ...(report.wait === undefined ? {} : { [semconv.ATTR_EVENT_LOOP_WAIT]: report.wait }),
    ...(top === undefined
      ? {}
      : {
          'code.function.name': top.function === '' ? '<anonymous>' : top.function,
          'code.file.path': top.file,
          'code.line.number': top.line,
          'code.column.number': top.column,
        }),
  };
}

/** The spans of this thread: to the exporters `OTEL_TRACES_EXPORTER` names, made on the first block. */
export class BlockSpans {
  readonly #config: Pick<WatchdogWorkerData, 'exportSpans' | 'serviceName' | 'redact'>;
  readonly #log: (message: string) => void;
  #sink: Promise<SpanSink | undefined> | undefined;

  constructor(config: Pick<WatchdogWorkerData, 'exportSpans' | 'serviceName' | 'redact'>, log: (message: string) => void) {
    this.#config = config;
    this.#log = log;
  }

  /** Exports one span; its context, or undefined when no span is exported. */
  async export(report: BlockReport): Promise<Link['context'] | undefined> {
    this.#sink ??= this.#makeSink();
    const sink = await this.#sink;
    return sink === undefined ? undefined : exportBlockSpan(sink, report);
  }

  async #makeSink(): Promise<SpanSink | undefined> {
    const [
      { SimpleSpanProcessor, TracerProvider },
      { detectResources, envDetector, resourceFromAttributes },
      exporting,
      { Redactor },
      semconv,
    ] = await Promise.all([
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/resources'),
      import('../export/index.js'),
      import('../redaction/index.js'),
      import('../semconv/index.js'),
    ]);
    const logger = {
      warn: (_: object, msg: string) => {
        this.#log(msg);
      },
      info: () => undefined,
      debug: () => undefined,
    };
    const exporters = this.#config.exportSpans ? await exporting.traceExportersFromEnv() : [];
    if (exporters.length === 0) return undefined;
    let resource = detectResources({ detectors: [envDetector] });
    if (this.#config.serviceName !== undefined)
      resource = resource.merge(resourceFromAttributes({ 'service.name': this.#config.serviceName }));
    const provider = new TracerProvider({
      resource,
      spanProcessors: exporters.map(
        (exporter) =>
          new SimpleSpanProcessor({
            exporter: new exporting.RetryingExporter(
              new exporting.ExportWarningExporter(exporter, logger, exporting.otlpDestination()),
              logger,
            ),
          }),
      ),
    });
    const redactor = new Redactor(this.#config.redact);
    return { tracer: provider.getTracer(semconv.SCOPE_NAME), flush: () => provider.forceFlush(), redact: (text) => redactor.text(text) };
  }
}
