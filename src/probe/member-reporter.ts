import { context } from '@opentelemetry/api';
import { suppressTracing } from '@opentelemetry/core';
import { createRequire } from 'node:module';
import type { HealthStatus } from '../health/index.js';
import type { Logger } from '../log/index.js';
import { findPortHolder } from './port-holder.js';
import { isAncestor, procStat } from './proc.js';
import {
  dialHost,
  encodeReport,
  holderMac,
  instanceHolder,
  MEMBER_ROUTE,
  sameMac,
  type InstanceHolder,
  type MemberReport,
} from './instance.js';

// Required, not imported: see the probe server (an ES import of node:http sets a global).
const { get } = createRequire(import.meta.url)('node:http') as typeof import('node:http');

/** A process that found its service instance's probe server on the port, and may report to it. */
export interface MemberReporter {
  /** The holder's pid. */
  readonly holderPid: number;
  /** Whether this process reports its liveness there. */
  readonly reporting: boolean;
  /** Stops reporting and tells the holder to forget this process. Idempotent. */
  close(): Promise<void>;
}

/** Options of {@link joinHolder}. */
export interface JoinOptions {
  /** The busy probe port. */
  readonly port: number;
  /** The host the probe server would have bound. */
  readonly host: string;
  /** This process's liveness, read at each report. */
  readonly live: () => HealthStatus;
  /** How long the holder may go without a report before it judges this process's loop stopped. */
  readonly staleAfterMs: number;
  /** How often to report. */
  readonly everyMs: number;
  readonly logger: Logger;
  /** The most the first report may take. Default 1 000 ms. */
  readonly timeoutMs?: number;
  /**
   * Whether to report liveness (a `node:cluster` worker, a forked helper: part of the service), or
   * only to find out that the holder is the instance's (a script or tool the service ran).
   */
  readonly report: boolean;
}

/**
 * Joins the probe server holding `port` when it is this service instance's own: the process named
 * by the key this process inherited ({@link instanceHolder}), proven either by its answer to a
 * report keyed with it or by the process tree (the port's listener is that process, an ancestor of
 * this one: a holder too busy to answer in time is still known). With `report`, then reports
 * liveness every `everyMs` until closed. `undefined` for any other holder, whatever it answers.
 */
export async function joinHolder(options: JoinOptions): Promise<MemberReporter | undefined> {
  const holder = instanceHolder();
  if (holder === undefined || holder.port !== options.port || holder.pid === process.pid) return undefined;
  let seq = 0;
  const started = procStat('self')?.startTime;
  const report = (bye = false): MemberReport => {
    const live = options.live();
    return {
      pid: process.pid,
      seq: seq++,
      ok: live.ok,
      unhealthy: live.unhealthy,
      staleAfterMs: options.staleAfterMs,
      ...(started === undefined ? {} : { started }),
      ...(bye ? { bye } : {}),
    };
  };
  const host = dialHost(options.host);
  // Awaited by start-up, so not unref-ed: a process with nothing else to do must still learn the answer.
  // One that will not report says so at once (a bye): it is no member to watch.
  const answered = await send(holder, host, report(!options.report), options.timeoutMs ?? 1_000, false);
  if (!answered && !(findPortHolder(options.port).pid === holder.pid && isAncestor(holder.pid))) return undefined;
  if (!options.report) return { holderPid: holder.pid, reporting: false, close: () => Promise.resolve() };
  let failing = !answered;
  const timer = setInterval(() => {
    void send(holder, host, report(), options.everyMs, true).then((taken) => {
      // Said once per change: a holder that restarts or is gone must not flood the log.
      if (taken === !failing) return;
      failing = !taken;
      if (failing)
        options.logger.warn(
          { port: options.port, holder: holder.pid },
          'lifeline: the probe server this process reports to does not answer',
        );
      else
        options.logger.info({ port: options.port, holder: holder.pid }, 'lifeline: the probe server this process reports to answers again');
    });
  }, options.everyMs);
  timer.unref();
  let closing: Promise<void> | undefined;
  return {
    holderPid: holder.pid,
    reporting: true,
    close() {
      closing ??= (async () => {
        clearInterval(timer);
        await send(holder, host, report(true), 1_000, true);
      })();
      return closing;
    },
  };
}

/** Most of a holder's answer read: its MAC in JSON is under 100 bytes. */
const MAX_ANSWER_BYTES = 1_024;

/**
 * Sends one report; true when the holder answered it with the instance key. Settles once, within
 * `timeoutMs`, whatever the holder does. Never traced: these requests are lifeline's own.
 */
function send(holder: InstanceHolder, host: string, report: MemberReport, timeoutMs: number, unref: boolean): Promise<boolean> {
  const { query, mac } = encodeReport(holder.key, report);
  return new Promise((resolve) => {
    let settled = false;
    const settle = (taken: boolean): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(taken);
    };
    const timer = setTimeout(() => {
      settle(false);
    }, timeoutMs);
    if (unref) timer.unref();
    const req = context.with(suppressTracing(context.active()), () =>
      get({ host, port: holder.port, path: `${MEMBER_ROUTE}?${query}`, headers: { host: 'localhost' }, agent: false }, (res) => {
        if (res.statusCode !== 200) {
          settle(false);
          return;
        }
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (text.length > MAX_ANSWER_BYTES) settle(false);
        });
        res.on('end', () => {
          settle(answeredWithKey(text, holder.key, mac));
        });
        res.on('error', () => {
          settle(false);
        });
        res.on('close', () => {
          settle(false); // after 'end' this changes nothing
        });
      }),
    );
    if (unref) req.on('socket', (socket) => socket.unref());
    req.on('error', () => {
      settle(false);
    });
  });
}

function answeredWithKey(text: string, key: string, mac: string): boolean {
  try {
    const { m } = JSON.parse(text) as { m?: unknown };
    return typeof m === 'string' && sameMac(m, holderMac(key, mac));
  } catch {
    return false;
  }
}
