import type { Server } from 'node:http';
import { inspect } from 'node:util';
import type { Diagnostics, HealthCatalog, Logger } from '../index.js';
import { logSwallowed } from '../log/index.js';

/** The signals lifeline ends the process on (when the app has no handler of its own): the kubelet's and PM2's, and Ctrl-C's. */
const SIGNALS = ['SIGTERM', 'SIGINT'] as const;
type EndingSignal = (typeof SIGNALS)[number];
/** A repeat of a signal within this is the same one forwarded twice (npm, a process group), not a person insisting. */
const INSIST_AFTER_MS = 1_000;

/** What watching the process's end needs from the rest of lifeline. */
export interface EndingParts {
  readonly health: HealthCatalog;
  readonly diagnostics: Diagnostics;
  readonly logger: Logger;
  /** The most a flush or shutdown may take before the process exits anyway. */
  readonly timeoutMs: number;
  /** Handle SIGTERM and SIGINT. */
  readonly signals: boolean;
  /** Handle an uncaught exception (or unhandled rejection) that would end the process. */
  readonly crashes: boolean;
  /** Tells the probes now, not at the next heartbeat (the watchdog thread answers them). */
  publish(): void;
  /** The app's servers (not the probe server), to stop and drain. */
  appServers(): Server[];
  drain(servers: readonly Server[], deadlineMs: number): Promise<void>;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

/**
 * Watches for the process's end — a signal, or an error nothing caught — so that what it was doing
 * is exported before it goes: whatever is in flight, as `(in flight, …, at SIGTERM)` snapshots, in
 * the last flush. Each handler acts alone only when the app has none of its own for that event: an
 * app that handles a signal ends itself (lifeline only exports and flushes), and one that handles
 * uncaught exceptions decides whether the process lives at all.
 */
export function watchEnding(parts: EndingParts): { stop(): void } {
  const { health, diagnostics, logger, timeoutMs } = parts;
  let ending: 'signal' | 'crash' | undefined;
  let signalledAt = 0;
  const evidence = (why: string): void => {
    try {
      diagnostics.exportEnding(why);
    } catch (error) {
      // The end matters more than its evidence.
      logSwallowed(logger, `exporting the work in flight at ${why}`, error);
    }
  };

  const onSignal = (signal: EndingSignal): void => {
    // Whether the app will end the process itself is known only now: it may register later than us.
    const appHandles = process.listenerCount(signal) > 1;
    if (ending === 'crash') return; // the crash's evidence is being flushed, and it exits with 1
    if (ending !== undefined) {
      // Told again by a person (a second Ctrl-C), not the same signal forwarded twice (npm, a
      // process group): the process goes now, unless the app decides.
      if (!appHandles && Date.now() - signalledAt >= INSIST_AFTER_MS) raise(signal);
      return;
    }
    ending = 'signal';
    signalledAt = Date.now();
    health.drain();
    parts.publish(); // readiness fails now, not at the next heartbeat
    if (appHandles) {
      // The app ends itself: what is in flight now is what it was doing when it was told to stop.
      evidence(signal);
      void withinBudget(parts.forceFlush(), timeoutMs);
      return;
    }
    // Ending the process is the signal's default action, so the process must still be here to take
    // it: the loop could otherwise run dry once the servers close, and exit with 0.
    const hold = setInterval(() => undefined, 1_000);
    void withinBudget(endGracefully(signal), timeoutMs).then(() => {
      clearInterval(hold);
      raise(signal);
    });
  };
  /**
   * No handler of the app's: the process is ending. Its servers stop taking requests and those in
   * flight finish (within half the budget), so the last flush holds every answered request.
   */
  const endGracefully = async (signal: EndingSignal): Promise<void> => {
    await parts.drain(parts.appServers(), timeoutMs / 2);
    // What did not finish in the drain is what the process was doing when it was killed.
    evidence(signal);
    await parts.shutdown(); // flushes, then stops the SDK
  };
  const handlers = new Map(
    SIGNALS.map(
      (signal) =>
        [
          signal,
          () => {
            onSignal(signal);
          },
        ] as const,
    ),
  );
  const raise = (signal: EndingSignal): void => {
    stop();
    process.kill(process.pid, signal); // no handler of ours left: the default action ends the process
  };

  const onUncaught = (error: unknown, origin: NodeJS.UncaughtExceptionOrigin): void => {
    // The app's own handler decides whether the process lives; lifeline ends only one that would
    // have died. Sentry's exits only when alone (it marks itself `_errorHandler`): beside it, lifeline ends it.
    const others = process
      .listeners('uncaughtException')
      .filter((listener) => listener !== onUncaught && (listener as { _errorHandler?: unknown })._errorHandler !== true);
    if (others.length > 0) return;
    process.stderr.write(fatalText(error));
    // What Node would do, but later: exit 1, whatever else happens meanwhile.
    process.exitCode = 1;
    if (ending === 'crash') return; // a second error while the first one's evidence is flushed
    ending = 'crash';
    health.drain();
    parts.publish();
    const why = origin === 'unhandledRejection' ? 'unhandled rejection' : 'uncaught exception';
    try {
      // In the context of the code that threw: the crash span links to the span it was in.
      diagnostics.exportCrash(error, why);
    } catch (failure) {
      logSwallowed(logger, `exporting the work in flight at an ${why}`, failure);
    }
    void withinBudget(parts.forceFlush(), timeoutMs).then(() => process.exit(1));
  };

  if (parts.signals) for (const [signal, handler] of handlers) process.on(signal, handler);
  // Any listener turns off --abort-on-uncaught-exception, and its core dump is worth more than a span.
  const crashes = parts.crashes && !abortsOnUncaught();
  if (crashes) process.on('uncaughtException', onUncaught);
  function stop(): void {
    for (const [signal, handler] of handlers) process.off(signal, handler);
    process.off('uncaughtException', onUncaught);
  }
  return { stop };
}

/** What Node prints for an uncaught exception (but the source line, which only Node knows). */
function fatalText(error: unknown): string {
  const text = error instanceof Error ? inspect(error) : `Uncaught ${inspect(error)}`;
  return `${text}\n\nNode.js ${process.version}\n`;
}

function abortsOnUncaught(): boolean {
  const flag = /--abort[-_]on[-_]uncaught[-_]exception/;
  return process.execArgv.some((arg) => flag.test(arg)) || flag.test(process.env.NODE_OPTIONS ?? '');
}

/** Waits for `work`, but never longer than `ms`; failures are swallowed (the end must go on). */
export function withinBudget(work: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    const done = (): void => {
      clearTimeout(timer);
      resolve();
    };
    work.then(done, done);
  });
}
