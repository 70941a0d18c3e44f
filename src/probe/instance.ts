import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * How the processes of one service instance recognise each other at the probe port. The process
 * that binds the port makes a random key and puts it, with its pid and the port, in this variable
 * of its own environment; processes it starts afterwards (cluster workers, forked helpers, their
 * children) inherit it, and nothing else has it: another container of the pod, a `kubectl exec`
 * script, an unrelated service. What a port answers proves nothing; an answer keyed with the
 * inherited key does.
 */
export const INSTANCE_ENV = 'LIFELINE_PROBE_HOLDER';

/** The route a member reports on; served only when the server has an instance key, only to loopback. */
export const MEMBER_ROUTE = '/lifeline/member';

/** A member's report: what its catalog says of liveness, and when the holder may call it stale. */
export interface MemberReport {
  readonly pid: number;
  /** Counts up per report: a holder keeps the newest. */
  readonly seq: number;
  /** Its liveness verdict. */
  readonly ok: boolean;
  /** Its unhealthy liveness components. */
  readonly unhealthy: readonly string[];
  /** No report for this long means its event loop is not running. */
  readonly staleAfterMs: number;
  /** When it started (`/proc/<pid>/stat`, Linux): a pid alive with another start time is another process. */
  readonly started?: string;
  /** The member is leaving (its lifeline shut down): forget it. */
  readonly bye?: boolean;
}

/** What a member finds in its environment: the holder to report to. */
export interface InstanceHolder {
  readonly pid: number;
  readonly port: number;
  readonly key: string;
}

/** A new key for a probe server about to be bound: 256 random bits. */
export function newInstanceKey(): string {
  return randomBytes(32).toString('base64url');
}

/** The environment value that names this process as holder of `port`. */
export function instanceValue(pid: number, port: number, key: string): string {
  return `1:${String(pid)}:${String(port)}:${key}`;
}

/** The holder named by the environment, or `undefined` for none (or a value that is not one). */
export function instanceHolder(env: NodeJS.ProcessEnv = process.env): InstanceHolder | undefined {
  const match = /^1:(\d{1,10}):(\d{1,5}):([A-Za-z0-9_-]{43})$/.exec(env[INSTANCE_ENV] ?? '');
  if (match === null) return undefined;
  return { pid: Number(match[1]), port: Number(match[2]), key: match[3] as string };
}

/** The MAC a member signs its report with. */
export function reportMac(key: string, encoded: string): string {
  return createHmac('sha256', key).update('member:').update(encoded).digest('hex');
}

/** The MAC a holder answers a report with: only a holder with the key can give it. */
export function holderMac(key: string, report: string): string {
  return createHmac('sha256', key).update('holder:').update(report).digest('hex');
}

/** Compares two hex MACs in constant time. */
export function sameMac(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Most unhealthy names one report carries, and their length: a report fits a request line. */
const MAX_NAMES = 32;
const MAX_NAME_LENGTH = 100;

/** The report as the query string of its request, and the MAC the holder's answer is made from. */
export function encodeReport(key: string, report: MemberReport): { query: string; mac: string } {
  const unhealthy = report.unhealthy.slice(0, MAX_NAMES).map((name) => name.slice(0, MAX_NAME_LENGTH));
  const encoded = Buffer.from(JSON.stringify({ ...report, unhealthy })).toString('base64url');
  const mac = reportMac(key, encoded);
  return { query: `r=${encoded}&m=${mac}`, mac };
}

/** The address to dial for a server bound to `host`: a wildcard is reached on loopback. */
export function dialHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}

/**
 * The report a query string carries, when its MAC is the key's and every field is well formed;
 * `undefined` for anything else. `mac` is the report's own MAC, which the holder answers.
 */
export function decodeReport(key: string, query: string): { report: MemberReport; mac: string } | undefined {
  const params = new URLSearchParams(query);
  const encoded = params.get('r');
  const mac = params.get('m');
  if (encoded === null || mac === null || encoded.length > 4_096 || !sameMac(mac, reportMac(key, encoded))) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  const r = value as Partial<Record<keyof MemberReport, unknown>>;
  if (
    typeof value !== 'object' ||
    value === null ||
    !Number.isSafeInteger(r.pid) ||
    (r.pid as number) <= 0 ||
    !Number.isSafeInteger(r.seq) ||
    typeof r.ok !== 'boolean' ||
    !Array.isArray(r.unhealthy) ||
    r.unhealthy.length > MAX_NAMES ||
    !r.unhealthy.every((name) => typeof name === 'string' && name.length <= MAX_NAME_LENGTH) ||
    typeof r.staleAfterMs !== 'number' ||
    !(r.staleAfterMs > 0 && r.staleAfterMs <= 2_147_483_647) ||
    (r.bye !== undefined && typeof r.bye !== 'boolean') ||
    (r.started !== undefined && (typeof r.started !== 'string' || !/^\d{1,20}$/.test(r.started)))
  )
    return undefined;
  return { report: value as MemberReport, mac };
}
