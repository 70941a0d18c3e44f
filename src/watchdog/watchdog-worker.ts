/**
 * The watchdog thread's entry (started by path by `startWatchdog`): only its side effects — it
 * reads what it was started with, builds its parts and starts the checks. The parts import with
 * none, so they are tested as they are.
 *
 * The thread watches the main thread's heartbeat (`block-detector.ts`); when the loop is blocked
 * past the threshold it captures the main thread's stack (`stack-capture.ts`) and exports an
 * `event loop blocked` span at once (`block-report.ts`, `block-span.ts`); when the loop runs again
 * it exports the whole block and tells the main thread. It serves the probes the main thread hands
 * it (`probe-answers.ts`). Nothing heavy is loaded until a block is reported: a healthy service
 * pays for a timer here and one on the main thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { BlockDetector, heartbeatOf } from './block-detector.js';
import { BlockReporter, type Reported } from './block-report.js';
import { BlockSpans } from './block-span.js';
import { CpuCounters } from './cpu-counters.js';
import { SourceMapper } from './frames.js';
import type { FromWatchdog, ToWatchdog, WatchdogWorkerData } from './messages.js';
import { ThreadProbes } from './probe-answers.js';
import { captureStack, waitChannel } from './stack-capture.js';
import { log } from './thread-log.js';

const config = workerData as WatchdogWorkerData;
const tell = (message: FromWatchdog): void => {
  parentPort?.postMessage(message);
};
const heartbeat = heartbeatOf(config.heartbeat);
const sourceMapper = config.sourceMaps ? new SourceMapper() : undefined;
const counters = new CpuCounters();
const spans = new BlockSpans(config, log);
// Its reports are the reporter's, made below: the detector only calls it once checks run.
const detector: BlockDetector<Promise<Reported>> = new BlockDetector(config, heartbeat, counters.sample(), (start) =>
  reporter.detected(start),
);
const runnableFor = (ms: number): Promise<void> => detector.runnableFor(ms);
const probes = new ThreadProbes(config, tell, () => detector.block);
const reporter = new BlockReporter({
  capture: () =>
    captureStack({ inspectorOpen: heartbeat.inspectorOpen, sourceMapper, timeoutMs: config.captureTimeoutMs, runnableFor, log }),
  waitChannel: () => waitChannel(),
  exportSpan: (report) => spans.export(report),
  tell,
  block: () => detector.block,
  failsProbes: (ownMs) => probes.failsProbes(ownMs),
  runnableFor,
  captureTimeoutMs: config.captureTimeoutMs,
  log,
});

setInterval(() => {
  const outcome = detector.check(counters.sample());
  if (outcome?.type === 'ended') reporter.ended(outcome.block, outcome.now);
  else if (outcome?.type === 'starved') tell(outcome);
}, config.pollMs);

parentPort?.on('message', (message: ToWatchdog) => {
  probes.receive(message);
});
probes.prepare();
