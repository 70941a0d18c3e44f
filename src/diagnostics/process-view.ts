import { monitorEventLoopDelay } from 'node:perf_hooks';
import { bracketed } from '../net/index.js';
import type { HandleInfo } from './types.js';

const RESOLUTION_MS = 20;

/**
 * Most handles listed. `process.report` walks and serializes every handle on the loop thread (with
 * 10,000 open sockets, 0.4–0.7 s per call): past this many active resources it is not read at all,
 * and the list holds one `omitted` entry; `activeResources` still counts every one by type.
 */
export const MAX_HANDLES = 1_000;

interface ReportHandle {
  type?: string;
  is_active?: boolean;
  is_referenced?: boolean;
  localEndpoint?: { host?: string; ip4?: string; ip6?: string; port?: number } | null;
  remoteEndpoint?: { host?: string; ip4?: string; ip6?: string; port?: number } | null;
  firesInMsFromNow?: number;
  repeat?: number;
}

/** The process side of a diagnostic: what libuv is waiting on (sockets, timers) and loop delay. */
export class ProcessView {
  #histogram: ReturnType<typeof monitorEventLoopDelay> | undefined;

  /** Starts sampling event-loop delay (cheap: one native timer). Idempotent. */
  start(): void {
    if (this.#histogram !== undefined) return;
    this.#histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    this.#histogram.enable();
  }

  stop(): void {
    this.#histogram?.disable();
    this.#histogram = undefined;
  }

  /** Event-loop delay since the previous diagnostic (or since sampling started). */
  eventLoopDelayMs(): { p50: number; p99: number; max: number } {
    const h = this.#histogram;
    if (h === undefined || h.count === 0) return { p50: 0, p99: 0, max: 0 };
    // Each sample includes the sampling timer's own period: what exceeds it is the loop's delay.
    const delay = (ns: number): number => round(Math.max(0, ns / 1e6 - RESOLUTION_MS));
    return { p50: delay(h.percentile(50)), p99: delay(h.percentile(99)), max: delay(h.max) };
  }

  /** Starts a new delay window, so the next diagnostic reports recent delay, not start-up's. */
  resetDelay(): void {
    this.#histogram?.reset();
  }

  /** libuv's active handles: TCP sockets with their endpoints, timers with when they fire. */
  handles(): HandleInfo[] {
    const active = process.getActiveResourcesInfo().length;
    if (active > MAX_HANDLES)
      return [omitted(`${active} active resources, over ${MAX_HANDLES}: handles not listed (counts by type in activeResources)`)];
    const report = process.report as NodeJS.ProcessReport & { excludeNetwork: boolean };
    // Reverse DNS of every endpoint would make a dump slow and leak lookups: numbers only.
    const excludeNetwork = report.excludeNetwork;
    report.excludeNetwork = true;
    let libuv: ReportHandle[];
    try {
      libuv = ((report.getReport() as { libuv?: ReportHandle[] }).libuv ?? []).filter((h) => h.is_active === true);
    } finally {
      report.excludeNetwork = excludeNetwork;
    }
    const handles = libuv.filter((h) => h.type !== 'async' && h.type !== 'check' && h.type !== 'idle' && h.type !== 'prepare');
    // Active resources and libuv handles are counted differently: the report may still hold more.
    if (handles.length > MAX_HANDLES)
      return [...handles.slice(0, MAX_HANDLES).map(describe), omitted(`${handles.length - MAX_HANDLES} more handles not listed`)];
    return handles.map(describe);
  }

  activeResources(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const name of process.getActiveResourcesInfo()) counts[name] = (counts[name] ?? 0) + 1;
    return counts;
  }
}

function omitted(details: string): HandleInfo {
  return { type: 'omitted', details };
}

function describe(handle: ReportHandle): HandleInfo {
  const type = handle.type ?? 'unknown';
  if (type === 'tcp' || type === 'udp') {
    return {
      type,
      details: `${endpoint(handle.localEndpoint)} -> ${endpoint(handle.remoteEndpoint)}${handle.is_referenced === false ? ' (unref)' : ''}`,
    };
  }
  if (type === 'timer')
    return { type, details: `fires in ${handle.firesInMsFromNow ?? '?'} ms${handle.is_referenced === false ? ' (unref)' : ''}` };
  return { type, details: handle.is_referenced === false ? 'unref' : 'ref' };
}

function endpoint(e: ReportHandle['localEndpoint']): string {
  if (e === null || e === undefined) return '-';
  const host = e.ip4 ?? e.ip6 ?? e.host ?? '?';
  return `${bracketed(host)}:${e.port ?? '?'}`;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
