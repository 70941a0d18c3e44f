import { request as httpRequest } from 'node:http';
import { Agent, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installDeadlineDispatcher, installHttpDeadlines, isDeadlineExceeded, withTimeout } from '../../src/index.js';
import { Installs } from '../../src/install/index.js';
import { cut, deadlineErrorOf } from '../support/cut.js';
import { neverAnswers, serve, type TestServer } from '../support/servers.js';

/** An Installs whose applies and undos are written down, in order. */
function recorded(): { installs: Installs<string>; log: string[] } {
  const log: string[] = [];
  const installs = new Installs<string>((options) => {
    log.push(`apply ${options}`);
    return () => log.push(`undo ${options}`);
  });
  return { installs, log };
}

describe('Installs: the latest install is in force', () => {
  it('a second install takes the first out before it goes in, and its uninstall brings the first back', () => {
    const { installs, log } = recorded();
    const a = installs.add('a');
    const b = installs.add('b');
    expect(log).toEqual(['apply a', 'undo a', 'apply b']);
    b.uninstall();
    expect(log.slice(3)).toEqual(['undo b', 'apply a']);
    a.uninstall();
    expect(log.slice(5)).toEqual(['undo a']);
    expect(installs.size).toBe(0);
  });

  it('uninstalling one that is not in force only takes it out of line', () => {
    const { installs, log } = recorded();
    const a = installs.add('a');
    const b = installs.add('b');
    a.uninstall();
    expect(log).toEqual(['apply a', 'undo a', 'apply b']);
    b.uninstall();
    expect(log.slice(3)).toEqual(['undo b']); // a is gone: nothing comes back
  });

  it('uninstall is idempotent, and using disposes', () => {
    const { installs, log } = recorded();
    const a = installs.add('a');
    {
      using b = installs.add('b');
      b.uninstall(); // then once more by `using`: nothing
    }
    a.uninstall();
    a.uninstall();
    expect(log).toEqual(['apply a', 'undo a', 'apply b', 'undo b', 'apply a', 'undo a']);
  });

  it('an install whose apply throws leaves the one in force as it was', () => {
    const log: string[] = [];
    const installs = new Installs<string>((options) => {
      if (options === 'bad') throw new Error('bad');
      log.push(`apply ${options}`);
      return () => log.push(`undo ${options}`);
    });
    installs.add('a');
    expect(() => installs.add('bad')).toThrow('bad');
    expect(log).toEqual(['apply a', 'undo a', 'apply a']);
    expect(installs.size).toBe(1);
  });
});

// The first install has a 150 ms rule for the server, the second none: had the two stacked, the
// first's rule would still cut the call at 150 ms; with the second in force alone, the call keeps
// the 400 ms deadline of its context.
describe('installing a client family twice', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await serve(neverAnswers);
  });
  afterAll(async () => {
    await server.close();
  });

  const shortRule = () => ({ policy: [{ match: { 'server.port': server.port }, timeoutMs: 150 }] });

  const get = (url: string) =>
    new Promise<void>((resolve, reject) => {
      const request = httpRequest(url, (response) => {
        response.resume();
        response.on('end', resolve);
      });
      request.on('error', reject);
      request.end();
    });

  const slot = Symbol.for('undici.globalDispatcher.2');
  const globalDispatcher = (): unknown => (globalThis as Record<symbol, unknown>)[slot];

  it.each([
    { family: 'node:http', install: installHttpDeadlines, call: get },
    { family: 'undici', install: installDeadlineDispatcher, call: (url: string) => fetch(url) },
  ])('$family: the second install is in force alone, and the first again once it goes', async ({ install, call }) => {
    const before = globalDispatcher();
    const first = install(shortRule());
    const second = install();
    try {
      const underSecond = await cut(
        (fn) => withTimeout(400, fn),
        () => call(`${server.url}/second`),
      );
      expect(deadlineErrorOf(underSecond.error)).toMatchObject({ deadline: underSecond.at, source: 'scope' });
      second.uninstall();
      const underFirst = await call(`${server.url}/first`).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isDeadlineExceeded(underFirst)).toBe(true);
      expect(deadlineErrorOf(underFirst)?.source).toBe('policy');
    } finally {
      second.uninstall();
      first.uninstall();
    }
    expect(globalDispatcher()).toBe(before); // nothing of either left
  });

  it('undici: a later install without a dispatcher builds on the one the install it replaces was given', async () => {
    const seen: string[] = [];
    const custom = new Agent().compose((dispatch) => (opts, handler) => {
      seen.push(opts.path);
      return dispatch(opts, handler);
    });
    const first = installDeadlineDispatcher({ dispatcher: custom });
    const second = installDeadlineDispatcher(shortRule());
    try {
      const { error } = await cut(
        (fn) => withTimeout(5_000, fn),
        () => fetch(`${server.url}/through-custom`),
      );
      expect(deadlineErrorOf(error)?.source).toBe('policy'); // the second's rule, in force
      expect(seen).toContain('/through-custom'); // on the first's dispatcher
    } finally {
      second.uninstall();
      first.uninstall();
      await custom.close();
    }
  });

  it('undici: a stand-in kept from an install replaced before its first request passes its calls to the install in force', async () => {
    const before = globalDispatcher();
    const first = installDeadlineDispatcher();
    // What code that read the global dispatcher early holds: Node's fetch reads the older API's slot.
    const kept = (globalThis as Record<symbol, unknown>)[Symbol.for('undici.globalDispatcher.1')] as Dispatcher;
    const second = installDeadlineDispatcher(shortRule());
    try {
      const { error } = await cut(
        (fn) => withTimeout(5_000, fn),
        () => fetch(`${server.url}/kept`, { dispatcher: kept } as unknown as RequestInit),
      );
      expect(deadlineErrorOf(error)?.source).toBe('policy'); // the second's rule
      expect(globalDispatcher()).toBe(second.dispatcher); // the second's, built by that call: the first did not put itself back
      expect(() => first.dispatcher).toThrow(/replaced by a later install/);
    } finally {
      second.uninstall();
      first.uninstall();
    }
    expect(globalDispatcher()).toBe(before);
  });
});
