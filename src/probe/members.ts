import type { HealthStatus } from '../health/index.js';
import { decodeReport, holderMac, type MemberReport } from './instance.js';

/** Most members one holder keeps: a cluster has one per core, a test runner one per worker. */
const MAX_MEMBERS = 256;

interface Member {
  report: MemberReport;
  /** When its newest report came (monotonic ms). */
  at: number;
}

/** What the probe server makes of a member's request. */
export type MemberAnswer =
  { readonly code: 200; readonly body: { m: string } } | { readonly code: 400 | 503; readonly body: { error: string } };

/**
 * The processes of this service instance that found the probe port taken by this one and run
 * without a probe server of their own: a `node:cluster` primary's workers, helpers it forked. Each
 * reports its liveness every half interval, keyed with the instance key it inherited; the holder's
 * `/live` fails while any member is unhealthy (`db@4242`) or has gone silent past the time its
 * report allows (`healthcheck@4242`: its event loop is not running). A member whose process is
 * gone is forgotten, so a cluster that replaces a crashed worker does not fail forever.
 */
export class ServiceMembers {
  readonly #key: string;
  readonly #members = new Map<number, Member>();
  readonly #alive: (pid: number) => boolean;
  /** The last merged status, reused while nothing changed: the probe server caches bodies per status object. */
  #merged: { base: HealthStatus; names: string; status: HealthStatus } | undefined;

  constructor(key: string, alive: (pid: number) => boolean = processAlive) {
    this.#key = key;
    this.#alive = alive;
  }

  /** Takes a report (the query string of a member's request). */
  receive(query: string): MemberAnswer {
    const decoded = decodeReport(this.#key, query);
    // The same answer for a bad MAC and a bad field: nothing to learn about the key from it.
    if (decoded === undefined) return { code: 400, body: { error: 'bad report' } };
    const { report, mac } = decoded;
    const known = this.#members.get(report.pid);
    if (report.bye === true) this.#members.delete(report.pid);
    else if (known !== undefined) {
      if (report.seq > known.report.seq) {
        known.report = report;
        known.at = performance.now();
      }
    } else if (this.#members.size >= MAX_MEMBERS) return { code: 503, body: { error: 'too many members' } };
    else this.#members.set(report.pid, { report, at: performance.now() });
    return { code: 200, body: { m: holderMac(this.#key, mac) } };
  }

  /** Liveness as the pod has it: the holder's own verdicts, failing with any member's. */
  live(base: HealthStatus): HealthStatus {
    const failing: string[] = [];
    const now = performance.now();
    for (const [pid, member] of this.#members) {
      if (now - member.at > member.report.staleAfterMs) {
        if (!this.#alive(pid)) {
          this.#members.delete(pid);
          continue;
        }
        failing.push(`healthcheck@${String(pid)}`);
      } else if (!member.report.ok) {
        for (const name of member.report.unhealthy) failing.push(`${name}@${String(pid)}`);
        if (member.report.unhealthy.length === 0) failing.push(`healthcheck@${String(pid)}`);
      }
    }
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
}

/** Whether a process with `pid` exists (one of another user's still does: EPERM). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
