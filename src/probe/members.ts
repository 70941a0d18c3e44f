import type { HealthStatus } from '../health/index.js';
import { decodeReport, holderMac, type MemberReport } from './instance.js';
import { procStat } from './proc.js';

/** Most members one holder keeps: a cluster has one per core. */
const MAX_MEMBERS = 256;

/** The longest silence a report may ask for: past it a member is judged stuck whatever it said. */
const MAX_STALE_MS = 10 * 60_000;

/** How often the holder checks that it ran itself: time it did not run (a paused pod) is no member's silence. */
const PAUSE_SAMPLE_MS = 250;

interface Member {
  report: MemberReport;
  /** When its newest report came (monotonic ms). */
  at: number;
  /** The holder's paused time then: silence while the holder itself did not run is not counted. */
  pausedAt: number;
}

/** What the probe server makes of a member's request. */
export type MemberAnswer =
  { readonly code: 200; readonly body: { m: string } } | { readonly code: 400 | 503; readonly body: { error: string } };

/** Whether the process a member named is still that process. */
export type MemberAlive = (pid: number, started: string | undefined) => boolean;

/**
 * The processes of this service instance that found the probe port taken by this one and run
 * without a probe server of their own: a `node:cluster` primary's workers, helpers it forked. Each
 * reports its liveness every half interval, keyed with the instance key it inherited; the holder's
 * `/live` fails while any member is unhealthy (`db@4242`) or has gone silent past the time its
 * report allows (`healthcheck@4242`: its event loop is not running). A member whose process is
 * gone (exited, a zombie, or its pid taken by another process) is forgotten, so a cluster that
 * replaces a crashed worker does not fail forever; time the holder itself did not run (a stopped
 * or paused pod) counts as no member's silence.
 */
export class ServiceMembers {
  readonly #key: string;
  readonly #members = new Map<number, Member>();
  readonly #alive: MemberAlive;
  /** The last merged status, reused while nothing changed: the probe server caches bodies per status object. */
  #merged: { base: HealthStatus; names: string; status: HealthStatus } | undefined;
  /** Ms this holder did not run, summed: its pause sampler's lateness. */
  #paused = 0;
  #sampler: NodeJS.Timeout | undefined;
  #sampledAt = 0;

  constructor(key: string, alive: MemberAlive = processAlive) {
    this.#key = key;
    this.#alive = alive;
  }

  /** Takes a report (the query string of a member's request). */
  receive(query: string): MemberAnswer {
    const decoded = decodeReport(this.#key, query);
    // The same answer for a bad MAC and a bad field: nothing to learn about the key from it.
    if (decoded === undefined) return { code: 400, body: { error: 'bad report' } };
    const { mac } = decoded;
    const report = { ...decoded.report, staleAfterMs: Math.min(decoded.report.staleAfterMs, MAX_STALE_MS) };
    const known = this.#members.get(report.pid);
    const now = performance.now();
    if (report.bye === true) this.#members.delete(report.pid);
    else if (known !== undefined) {
      if (report.seq > known.report.seq) Object.assign(known, { report, at: now, pausedAt: this.#paused });
    } else if (this.#members.size >= MAX_MEMBERS) return { code: 503, body: { error: 'too many members' } };
    else this.#members.set(report.pid, { report, at: now, pausedAt: this.#paused });
    this.#sample();
    return { code: 200, body: { m: holderMac(this.#key, mac) } };
  }

  /** Liveness as the pod has it: the holder's own verdicts, failing with any member's. */
  live(base: HealthStatus): HealthStatus {
    if (this.#members.size === 0) return base;
    const failing: string[] = [];
    const now = performance.now();
    for (const [pid, member] of this.#members) {
      const silent = now - member.at - (this.#paused - member.pausedAt);
      if (silent > member.report.staleAfterMs) {
        if (!this.#alive(pid, member.report.started)) {
          this.#members.delete(pid);
          continue;
        }
        failing.push(`healthcheck@${String(pid)}`);
      } else if (!member.report.ok) {
        for (const name of member.report.unhealthy) failing.push(`${name}@${String(pid)}`);
        if (member.report.unhealthy.length === 0) failing.push(`healthcheck@${String(pid)}`);
      }
    }
    this.#sample();
    if (failing.length === 0) return base;
    const names = failing.sort().join('\n');
    if (this.#merged?.base === base && this.#merged.names === names) return this.#merged.status;
    const status: HealthStatus = {
      ...base,
      ok: false,
      unhealthy: [...new Set([...base.unhealthy, ...failing])].sort(),
    };
    this.#merged = { base, names, status };
    return status;
  }

  /** How many members report here. */
  get size(): number {
    return this.#members.size;
  }

  /** Stops the pause sampler. */
  close(): void {
    clearInterval(this.#sampler);
    this.#sampler = undefined;
  }

  /** Samples while there are members: a holder with none keeps no timer. */
  #sample(): void {
    if (this.#members.size === 0) {
      this.close();
      return;
    }
    if (this.#sampler !== undefined) return;
    this.#sampledAt = performance.now();
    this.#sampler = setInterval(() => {
      const now = performance.now();
      this.#paused += Math.max(0, now - this.#sampledAt - 2 * PAUSE_SAMPLE_MS);
      this.#sampledAt = now;
    }, PAUSE_SAMPLE_MS);
    this.#sampler.unref();
  }
}

/** Linux tells a process's state and start time; elsewhere only whether a pid exists. */
const PROC = procStat('self') !== undefined;

/** Whether `pid` is still the member that reported: not gone, not a zombie, not another process with its pid. */
function processAlive(pid: number, started: string | undefined): boolean {
  if (PROC) {
    const stat = procStat(pid);
    return stat !== undefined && stat.state !== 'Z' && (started === undefined || stat.startTime === started);
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
