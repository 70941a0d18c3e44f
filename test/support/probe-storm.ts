import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';

const FIXTURES = new URL('../fixtures/', import.meta.url);
/** Imported by bench/ under plain Node too, which does not map `./node.js` to its `.ts`. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** What one probe server did under a silent flood. */
export interface StormResult {
  kind: 'lifeline' | 'plain';
  /** Probes sent, and those answered 200 within the timeout. */
  probes: number;
  answered: number;
  /** Slowest answered probe, ms. */
  worstMs: number;
  /** Connections the attackers opened per second: each one after the first `clients` followed a close by the server. */
  connectsPerSecond: number;
  /** What the server's heap (and external memory) grew by, after a GC, once every attacker had connected. */
  heapGrowthBytes: number;
  /** Amid the flood: files the server's process could still open (of 64), the error if not, descriptors it held. */
  files: { opened: number; error?: string; descriptors: number };
}

export interface StormShape {
  /** Silent clients, each reconnecting at once when cut. */
  clients: number;
  /** Source addresses they are spread over (127.0.1.1, 127.0.1.2, …); the probes come from 127.0.0.1. */
  addresses: number;
  /** How long probes are sent for. */
  ms: number;
  /** A probe every this many ms, each on a fresh connection. */
  periodMs: number;
  /** A probe not answered 200 within this many ms failed (the kubelet's default `timeoutSeconds` is 1). */
  timeoutMs: number;
}

/** One kubelet-style probe: a fresh connection, one request, `connection: close`. Ms to a 200, or undefined. */
export function probeOnce(port: number, timeoutMs: number, from = '127.0.0.1'): Promise<number | undefined> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress: from });
    let answer = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok ? performance.now() - started : undefined);
    };
    const timer = setTimeout(() => {
      done(false);
    }, timeoutMs);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      answer += chunk;
      if (answer.includes('"status":"pass"')) done(answer.startsWith('HTTP/1.1 200 '));
    });
    socket.on('error', () => {
      done(false);
    });
    socket.on('close', () => {
      done(answer.startsWith('HTTP/1.1 200 ') && answer.includes('"status":"pass"'));
    });
    socket.write('GET /live HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n');
  });
}

/** How the probe server's process is started. */
export interface StormServer {
  /** Options of startProbeServer besides the defaults (lifeline only). */
  limits?: Record<string, number>;
  /** Its open-files limit (soft and hard), as `ulimit -n` sets it. */
  openFiles?: number;
}

function child(script: string, args: string[], env: NodeJS.ProcessEnv = process.env, openFiles?: number): ChildProcess {
  const argv = ['--expose-gc', new URL(script, FIXTURES).pathname, ...args];
  const options = { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] as ('ignore' | 'inherit' | 'ipc')[] };
  if (openFiles === undefined) return spawn(process.execPath, argv, options);
  return spawn('/bin/sh', ['-c', `ulimit -n ${String(openFiles)} && exec "$0" "$@"`, process.execPath, ...argv], options);
}

function message<T>(from: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => {
      reject(new Error(`child exited (${String(code)}) before it answered`));
    };
    from.once('exit', onExit);
    from.once('message', (m) => {
      from.off('exit', onExit);
      resolve(m as T);
    });
  });
}

/**
 * Kubelet-style probes against a probe server of `kind` (in a process of its own) while silent
 * clients (in another) flood it. Probes are sent on schedule, not one after another, so a slow one
 * does not thin out the rest.
 */
export async function probesUnderSilentFlood(
  kind: 'lifeline' | 'plain',
  shape: StormShape,
  serving: StormServer = {},
): Promise<StormResult> {
  const env = { ...process.env, KIND: kind, LIMITS: JSON.stringify(serving.limits ?? {}) };
  const server = child('probe-target.mjs', [], env, serving.openFiles);
  let attack: ChildProcess | undefined;
  try {
    const { port } = await message<{ port: number }>(server);
    const heap = async () => {
      const reply = message<{ heap: number }>(server);
      server.send('memory');
      return (await reply).heap;
    };
    const before = await heap();
    attack = child('silent-clients.mjs', [String(port), String(shape.clients), String(shape.addresses)]);
    await message(attack); // every silent client has connected once
    const heapGrowthBytes = (await heap()) - before;
    const filesReply = message<StormResult['files']>(server);
    server.send('files');
    const files = await filesReply;
    const started = performance.now();
    const count = Math.floor(shape.ms / shape.periodMs);
    const results = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        await new Promise((resolve) => setTimeout(resolve, i * shape.periodMs));
        return probeOnce(port, shape.timeoutMs);
      }),
    );
    const reply = message<{ connects: number }>(attack);
    attack.send('stop');
    const { connects } = await reply;
    const seconds = (performance.now() - started) / 1_000;
    const answered = results.filter((ms) => ms !== undefined);
    return {
      kind,
      probes: results.length,
      answered: answered.length,
      worstMs: Math.max(0, ...answered),
      connectsPerSecond: Math.max(0, connects - shape.clients) / seconds,
      heapGrowthBytes,
      files,
    };
  } finally {
    attack?.kill();
    server.kill();
  }
}

export function describeStorm(r: StormResult): string {
  return `${r.kind}: ${String(r.answered)}/${String(r.probes)} probes answered (worst ${r.worstMs.toFixed(0)} ms), ${r.connectsPerSecond.toFixed(0)} attacker connects/s, heap +${(r.heapGrowthBytes / 2 ** 20).toFixed(1)} MB`;
}
