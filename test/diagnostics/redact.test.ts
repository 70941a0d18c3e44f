import { describe, expect, it } from 'vitest';
import { Redactor } from '../../src/diagnostics/index.js';
import { isLoopback } from '../../src/probe/index.js';

const redactor = new Redactor();

describe('Redactor (SPEC §8)', () => {
  it.each([
    ['https://user:pa55@api.example/x?a=1', 'https://api.example/x?a=1'],
    ['http://h/p?access_token=abc&page=2', 'http://h/p?access_token=REDACTED&page=2'],
    ['http://h/p?X-Amz-Signature=abc&sig=1', 'http://h/p?X-Amz-Signature=REDACTED&sig=REDACTED'],
    ['/p?password=hunter2', '/p?password=REDACTED'],
    ['http://h/p?page=2', 'http://h/p?page=2'],
    ['not a url at all', 'not a url at all'],
  ])('url(%j) = %j', (input, output) => {
    expect(redactor.url(input)).toBe(output);
  });

  it('redacts credential headers, query attributes and URLs inside free text', () => {
    expect(redactor.attribute('http.request.header.authorization', ['Bearer x'])).toEqual(['REDACTED']);
    expect(redactor.attribute('http.response.header.set_cookie', 'a=b')).toBe('REDACTED');
    expect(redactor.attribute('url.query', '?token=1&a=2')).toBe('?token=REDACTED&a=2');
    expect(redactor.attribute('http.request.method', 'GET')).toBeUndefined();
    expect(redactor.text('failed: GET https://u:p@h/x?secret=s (ECONNRESET)')).toBe('failed: GET https://h/x?secret=REDACTED (ECONNRESET)');
  });

  it('takes a configurable list', () => {
    const custom = new Redactor({ queryKeys: ['tenant'], headers: ['x-tenant'] });
    expect(custom.url('http://h/?tenant=acme&token=t')).toBe('http://h/?tenant=REDACTED&token=t');
    expect(custom.attribute('http.request.header.x-tenant', 'acme')).toBe('REDACTED');
  });
});

describe('isLoopback', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.3.2.1', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['10.0.0.1', false],
    ['::ffff:10.0.0.1', false],
    ['1270::1', false],
    [undefined, false],
  ])('%s -> %s', (address, expected) => {
    expect(isLoopback(address)).toBe(expected);
  });
});

describe('Redactor.text', () => {
  it.each([
    ['connect failed: password=hunter2 user=bob', 'connect failed: password=REDACTED user=bob'],
    ['Authorization: Bearer abc.def-ghi', 'Authorization: Bearer REDACTED'],
    ['api_key: 12345, region: eu', 'api_key: REDACTED, region: eu'],
    ['GET https://u:p@h/x?token=t failed', 'GET https://h/x?token=REDACTED failed'],
    ['nothing to hide here', 'nothing to hide here'],
  ])('%j -> %j', (input, output) => {
    expect(redactor.text(input)).toBe(output);
  });
});

describe('Redactor: headers named like secrets, fragments', () => {
  it.each(['x-auth-token', 'x-goog-api-key', 'private-token', 'x-amz-security-token'])('redacts header %s', (header) => {
    expect(redactor.attribute(`http.request.header.${header}`, ['v'])).toEqual(['REDACTED']);
  });
  it('redacts tokens in URL fragments and leaves plain headers', () => {
    expect(redactor.url('https://app/cb#access_token=abc&state=1')).toBe('https://app/cb#access_token=REDACTED&state=1');
    expect(redactor.attribute('http.request.header.accept', ['json'])).toBeUndefined();
  });
});

describe('Redactor.text on code locations and hostile input', () => {
  it('leaves stack frames alone, even in files named like secrets', () => {
    const frame = 'at login (/app/src/session-auth.js:12:3)';
    expect(redactor.text(frame)).toBe(frame);
  });

  it('stays fast on long runs of key-like text', () => {
    const started = performance.now();
    redactor.text('sig-'.repeat(20_000));
    redactor.text(`${'token.'.repeat(10_000)}=x`);
    expect(performance.now() - started).toBeLessThan(500);
  });
});
