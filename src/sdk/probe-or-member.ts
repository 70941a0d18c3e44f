import { DEFAULT_PROBE_PORT } from '../config/index.js';
import { oneOf } from '../errors/index.js';
import type { HealthCatalog, Logger, ProbeServer, ProbeServerOptions } from '../index.js';
import { defaultLogger } from '../log/index.js';
import {
  findPortHolder,
  INSTANCE_ENV,
  instanceHolder,
  instanceValue,
  joinHolder,
  newInstanceKey,
  type MemberReporter,
} from '../probe/index.js';
import type { LifelinePartsOptions } from './parts.js';

export type ProbeOptions = Omit<ProbeServerOptions, 'health'>;

/**
 * The probe server, or, when the port is taken by this service instance's own (the process that
 * started this one, proven by the key this one inherited), a reporter that keeps the holder's
 * `/live` honest about this process. Any other holder fails start-up (`whenPortBusy: 'fail'`) or
 * is warned of, naming it: never deferred to on the word of what it answers.
 */
export async function probeServer(
  options: NonNullable<Exclude<LifelinePartsOptions['probe'], false>>,
  serve: (options: ProbeOptions) => Promise<ProbeServer>,
  health: HealthCatalog,
  logger: Logger | undefined,
): Promise<{ probe?: ProbeServer; member?: MemberReporter }> {
  const { whenPortBusy = 'fail', ...rest } = options;
  oneOf('probe.whenPortBusy', whenPortBusy, ['fail', 'warn'] as const);
  const key = newInstanceKey();
  try {
    const probe = await serve({ ...rest, instanceKey: key });
    // Processes started from now on (cluster workers, forked helpers) inherit it, and nothing else has it.
    process.env[INSTANCE_ENV] = instanceValue(process.pid, probe.port, key);
    return { probe };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    const port = rest.port ?? DEFAULT_PROBE_PORT;
    const log = logger ?? defaultLogger();
    const member = await joinHolder({
      port,
      host: rest.host ?? '127.0.0.1',
      live: () => health.status('liveness'),
      staleAfterMs: health.stallAfterMs,
      everyMs: Math.max(100, health.interval / 2),
      logger: log,
      // Part of the service (a cluster worker, a forked helper: it has a channel to its parent)
      // answers for the pod's liveness; a script or tool the service runs does not.
      report: process.channel !== undefined,
    });
    if (member !== undefined) {
      log.info(
        { port, holder: member.holderPid },
        member.reporting
          ? 'lifeline: the probe server of this service instance (the process that started this one) answers the probes on this port; this process reports its liveness there'
          : 'lifeline: the probe server of this service instance (the process that started this one) answers the probes on this port; this process, which it ran without a channel to it, does not answer for the pod',
      );
      return { member };
    }
    const { description: holder } = findPortHolder(port);
    if (whenPortBusy === 'fail') throw Object.assign(err as Error, { holder });
    log.warn(
      { port, holder },
      `lifeline: the probe port is held by ${holder}, not by this service instance; running without a probe server`,
    );
    return {};
  }
}

/** Processes started after this process's probe server closed must not report to it. */
export function leaveInstance(probe: ProbeServer | undefined): void {
  if (probe !== undefined && instanceHolder()?.pid === process.pid) Reflect.deleteProperty(process.env, INSTANCE_ENV);
}
