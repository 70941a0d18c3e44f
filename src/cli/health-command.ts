import { parseArgs, styleText } from 'node:util';
import { DEFAULT_PROBE_PORT } from '../config/index.js';
import { parseDuration } from './duration.js';

/** Where a command writes: injected so tests and the bin share one code path. */
export interface CommandIO {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream;
}

/** Exit codes of `lifeline health`. */
export const EXIT_PASS = 0;
export const EXIT_FAIL = 1;
export const EXIT_UNREACHABLE = 2;

const PROBES = ['live', 'ready', 'startup'] as const;
const DEFAULT_URL = `http://127.0.0.1:${String(DEFAULT_PROBE_PORT)}`;

export const HEALTH_USAGE = `Usage: lifeline health [--url URL] [--probe live|ready|startup] [--timeout 20s] [--json]

Asks a lifeline probe server for its verdicts.
  --url URL        probe server base URL (default ${DEFAULT_URL})
  --probe NAME     live, ready or startup (default ready)
  --timeout DUR    give up after DUR: 500ms, 20s, 1m (default 20s)
  --json           print the probe's JSON body instead of text
Exit codes: 0 pass, 1 fail, 2 unreachable or bad arguments.
`;

interface ProbeBody {
  status: 'pass' | 'fail';
  healthy: string[];
  unhealthy: string[];
  /** Present while the service's event loop is blocked (served by its watchdog thread). */
  eventLoop?: { blockedMs: number; blockedIn?: string };
}

/** `lifeline health`: returns the exit code. */
export async function healthCommand(args: readonly string[], io: CommandIO): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      options: {
        url: { type: 'string', default: DEFAULT_URL },
        probe: { type: 'string', default: 'ready' },
        timeout: { type: 'string', default: '20s' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    return usageError(io, (err as Error).message);
  }
  if (parsed.help) {
    io.stdout.write(HEALTH_USAGE);
    return EXIT_PASS;
  }
  const probe = PROBES.find((p) => p === parsed.probe);
  if (probe === undefined) return usageError(io, `invalid --probe ${JSON.stringify(parsed.probe)}: expected live, ready or startup`);
  const timeoutMs = parseDuration(parsed.timeout);
  if (timeoutMs === undefined)
    return usageError(io, `invalid --timeout ${JSON.stringify(parsed.timeout)}: expected a duration such as 500ms, 20s or 1m`);
  const target = probeUrl(parsed.url, probe);
  if (target === undefined) return usageError(io, `invalid --url ${JSON.stringify(parsed.url)}: expected an http:// or https:// URL`);

  let body: ProbeBody;
  try {
    const response = await fetch(target, { signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'application/json' } });
    const text = await readAtMost(response, 1 << 20);
    const decoded = (response.status === 200 || response.status === 503) && decodeBody(text);
    if (!decoded) {
      io.stderr.write(`lifeline health: unexpected answer from ${target.href}: HTTP ${response.status}\n`);
      return EXIT_UNREACHABLE;
    }
    body = decoded;
  } catch (err) {
    io.stderr.write(
      `lifeline health: could not reach ${target.href}: ${reason(err, timeoutMs)}\nIs the service running with its probe server on that address?\n`,
    );
    return EXIT_UNREACHABLE;
  }

  if (parsed.json) io.stdout.write(`${JSON.stringify(body)}\n`);
  else io.stdout.write(formatText(body, io.stdout));
  return body.status === 'pass' ? EXIT_PASS : EXIT_FAIL;
}

/** The body as text, cut at `max` bytes: a probe answer is small, a hostile server's need not be. */
async function readAtMost(response: Response, max: number): Promise<string> {
  const reader = response.body?.getReader();
  if (reader === undefined) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = (await reader.read()) as { done: boolean; value?: Uint8Array };
    if (done || value === undefined) break;
    chunks.push(value);
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      break;
    }
  }
  return Buffer.concat(chunks).toString('utf8');
}

function formatText(body: ProbeBody, stream: CommandIO['stdout']): string {
  const pass = body.status === 'pass';
  const paint = (color: 'green' | 'red', text: string): string => styleText(color, text, { stream, validateStream: true });
  const lines = [`Health: ${paint(pass ? 'green' : 'red', pass ? 'PASS' : 'FAIL')}`, `=== ${body.healthy.length} healthy components ===`];
  if (body.healthy.length > 0) lines.push(paint('green', body.healthy.join(', ')));
  lines.push(`=== ${body.unhealthy.length} unhealthy components ===`);
  if (body.unhealthy.length > 0) lines.push(paint('red', body.unhealthy.join(', ')));
  const loop = body.eventLoop;
  if (loop !== undefined)
    lines.push(
      paint(
        'red',
        `event loop blocked for ${(loop.blockedMs / 1_000).toFixed(1)} s${loop.blockedIn === undefined ? '' : ` in ${loop.blockedIn}`}`,
      ),
    );
  return `${lines.join('\n')}\n`;
}

/** The probe URL: `--url` as given when it already names a probe path, else its base plus `/<probe>`. */
function probeUrl(base: string, probe: (typeof PROBES)[number]): URL | undefined {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (/\/(live|ready|startup)$/.test(url.pathname)) return url;
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/${probe}`;
  return url;
}

function decodeBody(text: string): ProbeBody | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { status, healthy, unhealthy, eventLoop } = value as Record<string, unknown>;
  if ((status !== 'pass' && status !== 'fail') || !isNames(healthy) || !isNames(unhealthy)) return undefined;
  const body: ProbeBody = { status, healthy: healthy.map(printable).sort(), unhealthy: unhealthy.map(printable).sort() };
  if (typeof eventLoop === 'object' && eventLoop !== null) {
    const { blockedMs, blockedIn } = eventLoop as Record<string, unknown>;
    if (typeof blockedMs === 'number' && Number.isFinite(blockedMs))
      body.eventLoop = { blockedMs, ...(typeof blockedIn === 'string' ? { blockedIn: printable(blockedIn.slice(0, 500)) } : {}) };
  }
  return body;
}

/** A name without control characters: a hostile server must not drive the user's terminal. */
function printable(name: string): string {
  // eslint-disable-next-line no-control-regex
  return name.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

function isNames(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((name) => typeof name === 'string');
}

function reason(err: unknown, timeoutMs: number): string {
  if (err instanceof DOMException && err.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}

function usageError(io: CommandIO, message: string): number {
  io.stderr.write(`lifeline health: ${message}\n\n${HEALTH_USAGE}`);
  return EXIT_UNREACHABLE;
}
