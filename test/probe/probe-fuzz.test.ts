import fc from 'fast-check';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthCatalog, startProbeServer, type ProbeServer } from '../../src/index.js';

let probe: ProbeServer;
const health = new HealthCatalog();

beforeAll(async () => {
  health.registerLiveness('fuzzed');
  probe = await startProbeServer({
    health,
    port: 0,
    requestTimeoutMs: 300,
    logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
  });
});
afterAll(async () => {
  await probe.close();
  health.close();
});

/** Writes `chunks` (with `gapMs` between them) and returns what the server answered before closing or `waitMs`. */
function exchange(chunks: Buffer[], gapMs: number, waitMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(probe.port, '127.0.0.1');
    let answer = '';
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(done, waitMs);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', done);
    socket.on('close', done);
    let i = 0;
    const next = () => {
      const chunk = chunks[i++];
      if (chunk === undefined || socket.destroyed) return;
      socket.write(chunk);
      setTimeout(next, gapMs);
    };
    next();
  });
}

const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/);
const anyText = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '\r\n', '\0', '%00', '../..', '/live', '/ready', '/startup', '/debug/diagnostics'),
);
const method = fc.oneof(
  fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT', 'PATCH', 'PRI'),
  token,
  anyText,
);
const path = fc.oneof(
  fc.constantFrom('/live', '/ready', '/startup', '/live?x=1', '//live', '/LIVE', '*', '/debug/diagnostics'),
  fc.webPath(),
  anyText.map((t) => `/${t}`),
);
const header = fc.tuple(
  fc.oneof(token, anyText, fc.constant('x-request-timeout-ms'), fc.constant('content-length'), fc.constant('transfer-encoding')),
  fc.oneof(anyText, fc.integer().map(String), fc.constant('chunked')),
);
const request = fc.record({
  method,
  path,
  version: fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/9', ''),
  headers: fc.array(header, { maxLength: 6 }),
  body: fc.oneof(fc.constant(''), anyText),
  cut: fc.option(fc.nat(), { nil: undefined }), // send only a prefix: a partial request
  pieces: fc.integer({ min: 1, max: 4 }),
});

describe('the probe server under fuzzed requests (never a crash, never an internal detail)', () => {
  it('answers 3,000 random, partial and slow requests with a bare HTTP status or a close, and keeps serving', async () => {
    const samples = fc.sample(request, { numRuns: 3_000, seed: 42 });
    let answered = 0;
    for (let i = 0; i < samples.length; i += 100) {
      const batch = samples.slice(i, i + 100);
      const answers = await Promise.all(
        batch.map((r, j) => {
          const text = `${r.method} ${r.path} ${r.version}\r\n${r.headers.map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n${r.body}`;
          const bytes = Buffer.from(r.cut === undefined ? text : text.slice(0, r.cut % (text.length + 1)), 'latin1');
          const size = Math.ceil(bytes.length / r.pieces) || 1;
          const chunks = Array.from({ length: r.pieces }, (_, k) => bytes.subarray(k * size, (k + 1) * size)).filter((c) => c.length > 0);
          // One in ten drips its bytes slowly; the server's request timeout (300 ms) must end those.
          return exchange(chunks, (i + j) % 10 === 0 ? 60 : 0, 1_500);
        }),
      );
      for (const answer of answers) {
        if (answer === '') continue; // closed (or still waiting on a partial request) without a word
        answered++;
        expect(answer).toMatch(/^HTTP\/1\.1 \d{3} /);
        expect(answer).not.toMatch(/\bat \S+ \(|node:internal|Error:/);
      }
    }
    expect(answered).toBeGreaterThan(1_000);
    expect((await fetch(`${probe.url}/live`)).status).toBe(503); // `fuzzed` never took a tick: still the right verdict
    expect(((await (await fetch(`${probe.url}/live`)).json()) as { unhealthy: string[] }).unhealthy).toEqual(['fuzzed']);
  }, 120_000);
});
