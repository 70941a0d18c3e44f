/**
 * The watchdog thread. It watches the main thread's heartbeat (a counter in shared memory the main
 * thread bumps on a timer); when the counter stands still past the threshold the main thread's
 * event loop is blocked, and this thread, which runs on regardless, captures the main thread's
 * JavaScript stack through the inspector and exports an `event loop blocked` span at once — the
 * process may be killed before its loop comes back. When the counter moves again it exports the
 * whole block and tells the main thread. A stall the process was starved of CPU through (stopped,
 * throttled) is not a block: see `stall`.
 *
 * Nothing heavy is loaded until a block is reported: a healthy service pays for a timer here and
 * one on the main thread.
 */
import { readdirSync, readFileSync, writeSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { parentPort, workerData } from 'node:worker_threads';
import type { Link, Tracer } from '@opentelemetry/api';
import type { DiagnosticSnapshot } from '../diagnostics/index.js';
import type { HealthStatus, ProbeKind } from '../health/index.js';
import type { HealthView, ProbeServer } from '../probe/index.js';
import { describeFrame, framesOf, SourceMapper, stackText, topUserFrame, type BlockedFrame, type InspectorCallFrame } from './frames.js';
import {
  BEAT,
  BEAT_TIME_OFFSET,
  INSPECTOR_OPEN,
  STARTED,
  type FromWatchdog,
  type ServedProbeOptions,
  type ToWatchdog,
  type WatchdogWorkerData,
} from './messages.js';

const config = workerData as WatchdogWorkerData;
const beats = new Int32Array(config.heartbeat, 0, BEAT_TIME_OFFSET / Int32Array.BYTES_PER_ELEMENT);
const beatTime = new BigInt64Array(config.heartbeat, BEAT_TIME_OFFSET, 1);
const sourceMapper = config.sourceMaps ? new SourceMapper() : undefined;

/** What the inspector found: the frames, and the trace active on the main thread then. */
interface Capture {
  frames: BlockedFrame[];
  active: { traceId: string; spanId: string } | undefined;
}

interface Block {
  /** Monotonic ms (this thread's clock) of the last heartbeat: where the block began. */
  readonly since: number;
  /** Epoch ms of the same instant. */
  readonly startedAt: number;
  /** Whether this block is reported (rate limit), and what was exported when it was detected. */
  readonly report: Promise<Reported> | undefined;
  /** Began before the app was serving: reported without spending the budget. */
  readonly startup: boolean;
  /** The frames, once captured: what probe answers show. */
  frames?: readonly BlockedFrame[] | undefined;
  /** How much of it, so far, the process was starved of CPU: not the loop's doing, no probe fails for it. */
  starvedMs: number;
  /**
   * The loop's own time in it at the last check: what fails probes. Read between checks as
   * wall time less the starvation counted so far, it would grow with starved time, then fall
   * back at the next check: probes would flap 503, 200, 503.
   */
  ownMs: number;
}

interface Reported {
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

/** The main thread's scheduler counters (Linux `schedstat`): ms on a CPU, and ms runnable but waiting for one. */
interface Schedule {
  readonly cpuMs: number;
  readonly waitMs: number;
}

const TASKS = `/proc/${String(process.pid)}/task`;
const MAIN_SCHEDSTAT = `${TASKS}/${String(process.pid)}/schedstat`;
let schedstat = true;

function schedule(path: string): Schedule {
  const [cpu, wait] = readFileSync(path, 'latin1').split(' ');
  return { cpuMs: Number(cpu) / 1e6, waitMs: Number(wait) / 1e6 };
}

function mainThreadSchedule(): Schedule | undefined {
  if (!schedstat) return undefined;
  try {
    return schedule(MAIN_SCHEDSTAT);
  } catch {
    schedstat = false; // not Linux, or a kernel without scheduler statistics: this thread's lateness alone tells
    return undefined;
  }
}

/**
 * The schedstat files of V8's platform threads, which a garbage collection on the main thread hands
 * work to and waits for: while they wait for a CPU, so does the main thread's collection, asleep
 * (not in the run queue itself). Found once: Node starts them with the process.
 */
const helperStats = ((): string[] => {
  try {
    return readdirSync(TASKS)
      .filter((task) => readFileSync(`${TASKS}/${task}/comm`, 'latin1').trim() === 'V8Worker')
      .map((task) => `${TASKS}/${task}/schedstat`);
  } catch {
    return [];
  }
})();

/** Each helper's wait for a CPU so far, in ms (0 for one gone). */
function helperWaits(): number[] {
  return helperStats.map((path) => {
    try {
      return schedule(path).waitMs;
    } catch {
      return 0;
    }
  });
}

/** CPU this thread used, in ms (Node 23.9+; 0 before, when its own lateness counts whole). */
function ownCpuMs(): number {
  const usage = typeof process.threadCpuUsage === 'function' ? process.threadCpuUsage() : undefined;
  return usage === undefined ? 0 : (usage.user + usage.system) / 1_000;
}

let seen = Atomics.load(beats, BEAT);
/** When this thread saw the last heartbeat: the stall's counters are marked then. */
let lastBeat = performance.now();
/** When the main thread beat last, on this thread's clock: a starved check sees a beat late. */
let beatAt = lastBeat;
let block: Block | undefined;
let lastReport = Number.NEGATIVE_INFINITY;
/** Start-up's block was reported: a second one during start-up spends the budget. */
let startupReported = false;

/**
 * Ms the process could not run, summed over this thread's checks: in each, the longest of this
 * thread's own lateness beyond its own work (all of a stopped process, SIGSTOP or a paused VM, or
 * one throttled at its CPU limit, is late), the main thread's wait for a CPU (the kernel counts
 * it) and that of a GC helper the main thread may be waiting for. Never more than the time the
 * main thread was not seen running: see `stall`.
 */
let deniedMs = 0;
let lastCheck = performance.now();
let lastOwnCpu = ownCpuMs();
let lastMain = mainThreadSchedule();
let lastHelpers = helperWaits();
/** The counters at the last heartbeat seen: a stall is measured from there. */
let mark = { deniedMs, main: lastMain };

setInterval(check, config.pollMs);

/**
 * How long the loop has not run, and how much of that the process was starved of CPU. A blocked
 * loop holds the main thread: it runs (a loop), or waits in a system call (`execSync`, sync I/O,
 * `Atomics.wait`) while this thread keeps its time; either is the loop's own time. Starved is
 * what was denied it, never more than the time the main thread was not seen running: a loop that
 * burned a threshold of CPU is blocked, however slowly it got it.
 */
function stall(now: number, main: Schedule | undefined): { wallMs: number; starvedMs: number; mainCpuMs: number | undefined } {
  const wallMs = now - lastBeat;
  const mainCpuMs = main === undefined || mark.main === undefined ? undefined : main.cpuMs - mark.main.cpuMs;
  return { wallMs, starvedMs: Math.max(0, Math.min(wallMs - (mainCpuMs ?? 0), deniedMs - mark.deniedMs)), mainCpuMs };
}

/**
 * Past this much wall time, a stall in which the main thread got a real share of the CPU it could
 * have had is a block whatever the share: a loop stuck in a pod throttled at 100m gets a tenth of a
 * core, and counting only its own CPU time would take ten thresholds to see it, and ten times the
 * stall limit to fail its probes. A stopped or paused process gets no share at all: still starved.
 */
const LONG_STALL_MS = Math.max(4 * config.thresholdMs, 10_000);
/** The least share of the stall's wall time the main thread must have run for a long stall to be its own. */
const LONG_STALL_SHARE = 0.01;

/** The loop's own time in a stall: its time less what it was starved of, or all of a long stall it ran in. */
function ownTime(wallMs: number, starvedMs: number, mainCpuMs: number | undefined): number {
  if (wallMs >= LONG_STALL_MS && mainCpuMs !== undefined && mainCpuMs >= LONG_STALL_SHARE * wallMs) return wallMs;
  return wallMs - starvedMs;
}

function check(): void {
  const now = performance.now();
  const cpu = ownCpuMs();
  const main = mainThreadSchedule();
  const late = now - lastCheck - config.pollMs - (cpu - lastOwnCpu);
  const mainWait = main === undefined || lastMain === undefined ? 0 : main.waitMs - lastMain.waitMs;
  const helpers = helperWaits();
  const helperWait = Math.max(0, ...helpers.map((wait, i) => wait - (lastHelpers[i] ?? wait)));
  lastHelpers = helpers;
  deniedMs += Math.max(0, late, mainWait, helperWait);
  const previousCheck = lastCheck;
  lastCheck = now;
  lastOwnCpu = cpu;
  lastMain = main;
  const current = Atomics.load(beats, BEAT);
  const { wallMs, starvedMs, mainCpuMs } = stall(now, main);
  const ownMs = ownTime(wallMs, starvedMs, mainCpuMs);
  if (block !== undefined) {
    block.starvedMs = starvedMs;
    block.ownMs = ownMs;
  }
  if (current !== seen) {
    seen = current;
    if (block !== undefined) ended(block, now);
    // The loop did not run for a threshold, but only because the process got no CPU: said, not blamed.
    // A stall just short of the threshold with a few ms starved is neither: nothing to say.
    else if (wallMs >= config.thresholdMs && ownMs < config.thresholdMs && starvedMs >= config.thresholdMs / 2)
      tell({ type: 'starved', stalledMs: wallMs, starvedMs, mainThreadCpuMs: mainCpuMs, startedAt: Date.now() - wallMs });
    block = undefined;
    // The beat came after the previous check (that one saw the old count): a clock that differs
    // between the threads cannot put it outside.
    beatAt = Math.min(now, Math.max(previousCheck, Number(Atomics.load(beatTime, 0)) / 1_000 - performance.timeOrigin));
    lastBeat = now;
    mark = { deniedMs, main };
    return;
  }
  if (block !== undefined) return;
  // Blocked once the loop's own time in the stall reaches the threshold: starved time does not count.
  if (ownMs >= config.thresholdMs) {
    const startup = Atomics.load(beats, STARTED) === 0;
    // Start-up (module loading) has a report of its own: a slow start must not hide the first real block.
    const startupReport = startup && !startupReported;
    const reported = startupReport || now - lastReport >= config.minReportIntervalMs;
    if (startupReport) startupReported = true;
    else if (reported) lastReport = now;
    // Measured from the beat: the app's own clock around the block agrees.
    const blockedMs = now - beatAt;
    const startedAt = Date.now() - blockedMs;
    block = {
      since: beatAt,
      startedAt,
      startup,
      starvedMs,
      ownMs,
      report: reported ? detected(startedAt, blockedMs, startup) : undefined,
    };
  }
}

/** Captures the stack and exports what is known at once. */
async function detected(startedAt: number, blockedMs: number, startup: boolean): Promise<Reported> {
  const { first, landed, unread } = capture();
  const firstCapture = await first;
  // Probes show where the loop is stuck at once, not after the export (slow or hung collector).
  if (block !== undefined && block.startedAt === startedAt) block.frames = firstCapture?.frames;
  const native = firstCapture === undefined && unread === undefined;
  const wait = native ? waitChannel() : undefined;
  const detectionSpan = exportBlock({
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
  }).catch((err: unknown) => {
    log(`lifeline: the event loop is blocked, and exporting its span failed: ${String(err)}`);
    return undefined;
  });
  return { first: firstCapture, landed, wait, unread, native, detectionSpan };
}

function ended(current: Block, now: number): void {
  const blockedMs = now - current.since;
  const failedProbes = failsProbes(current.ownMs);
  const report = current.report;
  if (report === undefined) {
    tell({
      type: 'block',
      blockedMs,
      startedAt: current.startedAt,
      frames: [],
      native: false,
      reported: false,
      startup: current.startup,
      failedProbes,
    });
    return;
  }
  void report
    .then(async ({ first, landed, wait, unread, native, detectionSpan }) => {
      // Outside JavaScript, the pause lands as soon as JavaScript runs again: in the caller of the native call.
      const capture = first ?? (await Promise.race([landed, runnableFor(config.captureTimeoutMs).then(() => undefined)]));
      // The main thread's verdict links to the span exported at detection, when that export is done.
      const span = await Promise.race([detectionSpan, runnableFor(config.captureTimeoutMs).then(() => undefined)]);
      tell({
        type: 'block',
        blockedMs,
        startedAt: current.startedAt,
        frames: capture?.frames ?? [],
        native,
        reported: true,
        startup: current.startup,
        failedProbes,
        ...(wait === undefined ? {} : { wait }),
        ...(span === undefined ? {} : { span: { traceId: span.traceId, spanId: span.spanId } }),
      });
      try {
        await exportBlock({
          startedAt: current.startedAt,
          endedAt: current.startedAt + blockedMs,
          blockedMs,
          ongoing: false,
          startup: current.startup,
          native,
          unread,
          capture,
          wait,
          link: await detectionSpan,
        });
      } catch (err) {
        log(`lifeline: exporting the span of an event loop block failed: ${String(err)}`);
      }
    })
    .catch((err: unknown) => {
      log(`lifeline: reporting an event loop block failed: ${String(err)}`); // never an unhandled rejection that ends this thread
    });
}

function tell(message: FromWatchdog): void {
  parentPort?.postMessage(message);
}

// The probe server, when the main thread hands it over: it answers from the verdicts the main
// thread publishes, so probes are answered while the main thread's loop is blocked — with 503 and
// where it is blocked once that lasts past the threshold and the catalog's stall limit.
const statuses = new Map<ProbeKind, HealthStatus>();
const diagnoses = new Map<number, { resolve: (snapshot: DiagnosticSnapshot) => void; reject: (err: Error) => void }>();
let nextDiagnosis = 0;
let probes: ProbeServer | undefined;
/** Probes fail once a block lasts this long: when the catalog's own check would fail too. */
let failProbesAfterMs: number | undefined;

/** Whether the probes this thread serves answer 503 after a block this long. */
function failsProbes(blockedMs: number): boolean {
  return failProbesAfterMs !== undefined && blockedMs >= failProbesAfterMs;
}

parentPort?.on('message', (message: ToWatchdog) => {
  switch (message.type) {
    case 'status':
      statuses.set(message.probe, message.status);
      break;
    case 'serve':
      failProbesAfterMs = Math.max(config.thresholdMs, message.stallAfterMs);
      void serve(message.options);
      break;
    case 'close-probes':
      void (probes?.close() ?? Promise.resolve()).then(() => {
        tell({ type: 'probes-closed' });
      });
      break;
    case 'diagnosis': {
      const pending = diagnoses.get(message.id);
      diagnoses.delete(message.id);
      if (message.snapshot !== undefined) pending?.resolve(message.snapshot);
      else pending?.reject(new Error(message.error ?? 'diagnostics failed'));
      break;
    }
  }
});

/** The probe server's module, loaded as the thread boots when probes will be asked for. */
let probeModule: Promise<typeof import('../probe/index.js')> | undefined = config.prepareProbes ? import('../probe/index.js') : undefined;
probeModule?.catch(() => undefined); // its failure is serve's to report

async function serve(options: ServedProbeOptions): Promise<void> {
  try {
    probeModule ??= import('../probe/index.js');
    const { startProbeServer } = await probeModule;
    const relay = (level: 'warn' | 'info' | 'debug') => (fields: object, msg: string) => {
      tell({ type: 'log', level, fields, msg });
    };
    probes = await startProbeServer({
      ...options,
      health: mirroredHealth,
      logger: { warn: relay('warn'), info: relay('info'), debug: relay('debug') },
    });
    tell({ type: 'serving', port: probes.port, url: probes.url });
  } catch (err) {
    const error = err as NodeJS.ErrnoException;
    tell({ type: 'serve-failed', name: error.name, code: error.code, message: error.message });
  }
}

/** The main thread's published verdicts; while its loop is blocked past both limits, failing live and ready. */
const mirroredHealth: HealthView = {
  status(probe) {
    const published = statuses.get(probe) ?? { ok: true, healthy: [], unhealthy: [] };
    const current = block;
    if (current === undefined || probe === 'startup') return published;
    // A shorter block changes no answer: the catalog would have answered 200 late, not 503. Nor
    // does the time the process was starved of CPU: a restart would not give it any.
    if (!failsProbes(current.ownMs)) return published;
    return blockedStatus(published, performance.now() - current.since, current.frames);
  },
  async diagnose() {
    const { EventLoopBlockedError } = await import('../probe/index.js');
    if (block !== undefined) throw new EventLoopBlockedError(performance.now() - block.since);
    const id = nextDiagnosis++;
    return new Promise<DiagnosticSnapshot>((resolve, reject) => {
      const timer = setTimeout(() => {
        diagnoses.delete(id);
        reject(new EventLoopBlockedError(config.captureTimeoutMs));
      }, config.captureTimeoutMs);
      diagnoses.set(id, {
        resolve: (snapshot) => {
          clearTimeout(timer);
          resolve(snapshot);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      tell({ type: 'diagnose', id });
    });
  },
};

/** The catalog's own `healthcheck` (which watches that rounds run) failing, with where the loop is stuck. */
function blockedStatus(published: HealthStatus, blockedMs: number, frames: readonly BlockedFrame[] | undefined): HealthStatus {
  const top = frames === undefined ? undefined : topUserFrame(frames);
  return {
    ok: false,
    healthy: published.healthy.filter((name) => name !== config.selfComponent),
    unhealthy: [...new Set([...published.unhealthy, config.selfComponent])].sort(),
    eventLoop: {
      blockedMs: Math.round(blockedMs),
      ...(top === undefined ? {} : { blockedIn: describeFrame(top) }),
      ...(frames === undefined
        ? {}
        : {
            frames: stackText(frames.slice(0, 5))
              .split('\n')
              .map((line) => line.trim().slice(3)),
          }),
    },
  };
}

/**
 * Pauses the main thread through the inspector and reads its frames. `Debugger.enable` and
 * `Debugger.pause` are sent together: a thread blocked in JavaScript handles them at its next
 * interrupt check (within milliseconds, even inside a regular expression or `Atomics.wait`); one
 * blocked in a native call (sync I/O, `execSync`) only once that call returns, and then pauses in
 * its caller. The debugger is enabled only for this.
 */
function capture(): { first: Promise<Capture | undefined>; landed: Promise<Capture | undefined>; unread?: string } {
  const none = Promise.resolve(undefined);
  // A debugger's breakpoint would be released by the resume below: leave its thread alone.
  if (Atomics.load(beats, INSPECTOR_OPEN) === 1) return { first: none, landed: none, unread: 'an inspector is open' };
  const session = new Session();
  try {
    session.connectToMainThread();
  } catch (err) {
    // No inspector in this build of Node, or it refused: the block is still reported, without frames.
    log(`lifeline: the event loop is blocked and its stack cannot be read: ${String(err)}`);
    return { first: none, landed: none, unread: 'no inspector' };
  }
  const scripts = new Map<string, string>();
  session.on('Debugger.scriptParsed', (message) => {
    if (message.params.url !== '') scripts.set(message.params.scriptId, message.params.url);
  });
  const paused = new Promise<{ callFrames: (InspectorCallFrame & { callFrameId: string })[] }>((resolve) => {
    session.once('Debugger.paused', (message) => {
      resolve(message.params as { callFrames: (InspectorCallFrame & { callFrameId: string })[] });
    });
  });
  session.post('Debugger.enable').catch(() => undefined);
  session.post('Debugger.pause').catch(() => undefined);
  const landed = paused.then(
    async ({ callFrames }) => {
      const frames = framesOf(callFrames, scripts);
      const active = await activeSpan(session, callFrames[0]?.callFrameId);
      await session.post('Debugger.resume').catch(() => undefined);
      await session.post('Debugger.disable').catch(() => undefined);
      session.disconnect();
      return { frames: sourceMapper === undefined ? frames : sourceMapper.map(frames), active };
    },
    () => undefined,
  );
  return { first: Promise.race([landed, runnableFor(config.captureTimeoutMs).then(() => undefined)]), landed };
}

/** The span active on the main thread where it is paused, read from the hook the main thread left. */
async function activeSpan(session: Session, callFrameId: string | undefined): Promise<Capture['active']> {
  if (callFrameId === undefined) return undefined;
  try {
    const evaluated = await Promise.race([
      session.post('Debugger.evaluateOnCallFrame', {
        callFrameId,
        expression: `globalThis[Symbol.for('otel-lifeline.watchdog')]?.activeSpan?.()`,
        returnByValue: true,
        silent: true,
      }),
      runnableFor(200).then(() => undefined),
    ]);
    const value: unknown = evaluated?.result.value;
    if (typeof value !== 'string') return undefined;
    const [traceId, spanId] = value.split('-');
    return traceId !== undefined && spanId !== undefined && /^[0-9a-f]{32}$/.test(traceId) && /^[0-9a-f]{16}$/.test(spanId)
      ? { traceId, spanId }
      : undefined;
  } catch {
    return undefined;
  }
}

/** How often the wait is read again while the main thread is seen running, and how far apart (ms). */
const WAIT_READS = 5;
const WAIT_READ_GAP_MS = 2;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * The main thread's kernel wait channel and system call number (Linux), for a block outside
 * JavaScript. A thread blocked in a system call is seen `running` for the moments the kernel runs
 * it (a pipe read woken by a partial write, a CPU-starved machine catching up): read a few times,
 * ms apart, before saying so.
 */
function waitChannel(): string | undefined {
  try {
    const task = `/proc/${String(process.pid)}/task/${String(process.pid)}`;
    let seen = 'running';
    for (let read = 0; read < WAIT_READS; read++) {
      if (read > 0) Atomics.wait(pause, 0, 0, WAIT_READ_GAP_MS);
      const channel = readFileSync(`${task}/wchan`, 'utf8').trim();
      const syscall = readFileSync(`${task}/syscall`, 'utf8').trim().split(' ')[0];
      seen = `${channel === '0' || channel === '' ? 'running' : channel}${syscall === undefined || syscall === 'running' ? '' : ` (syscall ${syscall})`}`;
      if (syscall !== undefined && syscall !== 'running') return seen;
    }
    return seen;
  } catch {
    return undefined;
  }
}

interface BlockReport {
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

let tracerReady: Promise<{ tracer: Tracer; flush: () => Promise<void>; redact: (text: string) => string } | undefined> | undefined;

/** Exports one `event loop blocked` span; returns its context (for the final span's link). */
async function exportBlock(report: BlockReport): Promise<Link['context'] | undefined> {
  tracerReady ??= makeTracer();
  const ready = await tracerReady;
  if (ready === undefined) return undefined;
  const [{ SpanStatusCode }, semconv] = await Promise.all([import('@opentelemetry/api'), import('../semconv/index.js')]);
  const frames = report.capture?.frames ?? [];
  const top = topUserFrame(frames);
  const seconds = (report.blockedMs / 1_000).toFixed(1);
  const where =
    top !== undefined
      ? ` in ${describeFrame(top)}`
      : report.unread !== undefined
        ? ` (stack not read: ${report.unread})`
        : report.wait !== undefined
          ? ` outside JavaScript (${report.wait})`
          : '';
  const links: Link[] = [];
  if (report.capture?.active !== undefined)
    links.push({ context: { ...report.capture.active, traceFlags: 1 }, attributes: { 'lifeline.link': 'active when blocked' } });
  if (report.link !== undefined) links.push({ context: report.link, attributes: { 'lifeline.link': 'detected' } });
  const span = ready.tracer.startSpan(semconv.SPAN_EVENT_LOOP_BLOCKED, {
    root: true,
    startTime: report.startedAt,
    links,
    attributes: {
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
    },
  });
  if (frames.length > 0) span.addEvent(semconv.SPAN_EVENT_LOOP_BLOCKED, { 'code.stacktrace': ready.redact(stackText(frames)) });
  span.setStatus({
    code: SpanStatusCode.ERROR,
    message: ready.redact(`event loop ${report.ongoing ? 'blocked for' : 'was blocked for'} ${seconds} s${where}`),
  });
  span.end(report.endedAt);
  await ready.flush();
  return span.spanContext();
}

async function makeTracer(): Promise<{ tracer: Tracer; flush: () => Promise<void>; redact: (text: string) => string } | undefined> {
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
      log(msg);
    },
    info: () => undefined,
    debug: () => undefined,
  };
  const exporters = config.exportSpans ? await exporting.traceExportersFromEnv() : [];
  if (exporters.length === 0) return undefined;
  let resource = detectResources({ detectors: [envDetector] });
  if (config.serviceName !== undefined) resource = resource.merge(resourceFromAttributes({ 'service.name': config.serviceName }));
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
  const redactor = new Redactor(config.redact);
  return { tracer: provider.getTracer(semconv.SCOPE_NAME), flush: () => provider.forceFlush(), redact: (text) => redactor.text(text) };
}

/** Written to stderr directly: console output of a worker goes through the main thread, which is blocked. */
function log(message: string): void {
  try {
    writeSync(2, `${JSON.stringify({ level: 40, time: Date.now(), pid: process.pid, name: 'lifeline', msg: message })}\n`);
  } catch {
    // nowhere to say it
  }
}

/**
 * Resolves once the process could have run for `ms`: time it was denied CPU (the counters of
 * `check`) does not count, so a loaded machine that hands the main thread a tenth of a core gets
 * as long to pause it as an idle one. At most ten times `ms` of wall time: bounded however starved.
 */
function runnableFor(ms: number): Promise<void> {
  const start = performance.now();
  const denied = deniedMs;
  return new Promise((resolve) => {
    const poll = setInterval(
      () => {
        const wallMs = performance.now() - start;
        if (wallMs - (deniedMs - denied) < ms && wallMs < 10 * ms) return;
        clearInterval(poll);
        resolve();
      },
      Math.min(ms, config.pollMs),
    );
  });
}
