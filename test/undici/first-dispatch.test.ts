import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runModule } from '../support/node.js';
import { serve, stallsBody } from '../support/servers.js';

// Each case runs in a fresh process: whether undici is loaded, and what the global slots hold, is
// per process. (One small file of undici, its symbols, is read at import; the rest is the cost:
// the package's index, or in the built package the bundle of the parts lifeline uses.)
const LOADED =
  "Object.keys((await import('node:module')).createRequire(import.meta.url).cache).some((f) => /\\/node_modules\\/undici\\/index\\.js$|\\/_chunks\\/undici\\.cjs$/.test(f))";

describe('the deadline dispatcher is built on the first request', () => {
  it('installing loads no undici; the first fetch builds it and is bounded like any other', async () => {
    const server = await serve(stallsBody);
    try {
      const result = await runModule(`
        import { installDeadlineDispatcher, isDeadlineExceeded, withTimeout } from 'otel-lifeline';
        const installed = installDeadlineDispatcher();
        const before = ${LOADED};
        const started = Date.now();
        const error = await withTimeout(300, () => fetch('${server.url}/').then((r) => r.text())).catch((e) => e);
        // The same through undici's own request (the newer handler API, the other slot).
        const undici = await import('undici');
        const second = await withTimeout(300, () => undici.request('${server.url}/').then((r) => r.body.text())).catch((e) => e);
        console.log(JSON.stringify({ before, after: ${LOADED}, fetch: isDeadlineExceeded(error), request: isDeadlineExceeded(second), ms: Date.now() - started }));
        installed.uninstall();
      `);
      expect(result.stderr).toBe('');
      const report = JSON.parse(result.stdout) as { before: boolean; after: boolean; fetch: boolean; request: boolean; ms: number };
      expect(report).toMatchObject({ before: false, after: true, fetch: true, request: true });
      expect(report.ms).toBeLessThan(5_000);
    } finally {
      await server.close();
    }
  });

  it("a request waiting for its connection (a TLS handshake nobody answers) leaves lifeline's undici at the deadline, not at the connect timeout", async () => {
    // The queue is undici's: only the dispatch option of the same undici copy takes a request out of
    // it (the published package's bundle of undici included), which ends the request, and its span, then.
    const silent = createServer(() => undefined); // takes the connection, never answers the ClientHello
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as AddressInfo;
      const result = await runModule(`
        import { subscribe } from 'node:diagnostics_channel';
        import { installDeadlineDispatcher, isDeadlineExceeded, withTimeout } from 'otel-lifeline';
        installDeadlineDispatcher();
        const started = Date.now();
        const ended = new Promise((resolve) => subscribe('undici:request:error', () => resolve(Date.now() - started)));
        const error = await withTimeout(300, () => fetch('https://127.0.0.1:${String(port)}/')).catch((e) => e);
        const requestEndedMs = await Promise.race([ended, new Promise((resolve) => setTimeout(() => resolve('still waiting'), 3_000))]);
        console.log(JSON.stringify({ bounded: isDeadlineExceeded(error), callerMs: Date.now() - started, requestEndedMs }));
        process.exit(0);
      `);
      expect(result.stderr).toBe('');
      const report = JSON.parse(result.stdout) as { bounded: boolean; callerMs: number; requestEndedMs: number | string };
      expect(report.bounded).toBe(true);
      expect(report.requestEndedMs).toBeTypeOf('number');
      expect(report.requestEndedMs).toBeLessThan(2_000); // undici's connect timeout is 10 s
    } finally {
      silent.close();
    }
  });

  it('code that composes the global dispatcher at start-up (a documented undici pattern) gets a real one, still bounded', async () => {
    const server = await serve(stallsBody);
    try {
      const result = await runModule(
        `
        import { installDeadlineDispatcher, isDeadlineExceeded, withTimeout } from 'otel-lifeline';
        import { getGlobalDispatcher, setGlobalDispatcher, interceptors } from 'undici';
        installDeadlineDispatcher();
        const global = getGlobalDispatcher();
        setGlobalDispatcher(global.compose(interceptors.dns()));
        const error = await withTimeout(300, () => fetch('${server.url}/').then((r) => r.text())).catch((e) => e);
        // An undici Dispatcher: of lifeline's own undici copy, so not an instance of the app's class.
        const classes = [];
        for (let proto = Object.getPrototypeOf(global); proto !== null; proto = Object.getPrototypeOf(proto)) classes.push(proto.constructor.name);
        console.log(JSON.stringify({ dispatcher: classes.includes('Dispatcher'), bounded: isDeadlineExceeded(error) }));
      `,
      );
      expect(result.stderr).toBe('');
      expect(JSON.parse(result.stdout)).toEqual({ dispatcher: true, bounded: true });
    } finally {
      await server.close();
    }
  });

  it('uninstalled before any request: the slots are as they were, and undici was never loaded', async () => {
    const result = await runModule(`
      import { installDeadlineDispatcher } from 'otel-lifeline';
      const slots = () => [Symbol.for('undici.globalDispatcher.1'), Symbol.for('undici.globalDispatcher.2')].map((s) => globalThis[s] === undefined);
      const before = slots();
      installDeadlineDispatcher().uninstall();
      console.log(JSON.stringify({ before, after: slots(), loaded: ${LOADED} }));
    `);
    expect(JSON.parse(result.stdout)).toEqual({ before: [true, true], after: [true, true], loaded: false });
  });
});
