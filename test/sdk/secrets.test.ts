import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/node.js';
import { otlpReceiver } from '../support/otlp-receiver.js';

const secret = (label: string) => `${label}-${randomBytes(6).toString('hex')}`;

describe('planted credentials never leave the process (docs/diagnostics.md)', () => {
  it('URL userinfo, token query values, authorization and cookie headers, a secret in an error message: in no exported span or event, no lifeline log line, not in /debug/diagnostics', async () => {
    const receiver = await otlpReceiver();
    const secrets = { TOKEN: secret('tok'), BEARER: secret('bearer'), COOKIE: secret('cookie'), PASSWORD: secret('pw') };
    // The eight forms an adversarial pass got through (seven reached exported spans before).
    const planted = {
      REFRESH_TOKEN: secret('refresh'),
      AUTH_TOKEN: secret('authtoken'),
      QUOTED_PASSWORD: secret('quoted'),
      NAME_TOKEN: secret('nametoken'),
      DB_PASSWORD: secret('dbpw'),
      CONNECT_SID: `s%3A${secret('sid')}.sig`,
      JWT: `eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIke${randomBytes(6).toString('hex')}In0.${secret('jwtsig')}`,
      ENCODED_TOKEN: secret('pct'),
      JSESSIONID: secret('jsid'),
      // The fourteen forms a later pass got through (all reached exported spans before).
      DB_PASSWORD_ATTR: secret('dbpwattr'),
      AUTH_TOKEN_ATTR: secret('authtokattr'),
      API_KEY_ATTR: secret('apikeyattr'),
      LOCATION_TOKEN: secret('location'),
      REFERER_TOKEN: secret('referer'),
      COLON_TOKEN: secret('colontok'),
      COLON_API_KEY: secret('colonapikey'),
      COLON_BEARER: secret('colonbearer'),
      SEMICOLON_TOKEN: secret('semicolon'),
      XML_PASSWORD: secret('xmlpw'),
      PEM_RSA: randomBytes(24).toString('base64url'),
      PEM_OPENSSH: randomBytes(24).toString('base64url'),
      USERINFO_PASSWORD: secret('userinfo'),
      DOUBLE_ENCODED_TOKEN: secret('pct2'),
    };
    const child = spawn(process.execPath, ['--input-type=module', '-e', `import '${ROOT}/test/fixtures/secrets-service.mjs';`], {
      cwd: ROOT,
      env: {
        ...process.env,
        ...secrets,
        PLANTED: JSON.stringify(planted),
        OTEL_SERVICE_NAME: 'secrets',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        LIFELINE_HEALTH_INTERVAL_MS: '200',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    try {
      const until = Date.now() + 20_000;
      while (
        !receiver.spans.some((s) => s.name.startsWith('GET /callback')) ||
        !receiver.spans.some((s) => s.name === 'SELECT users') ||
        !receiver.spans.some((s) => s.name === 'later shapes') ||
        receiver.spans.filter((s) => s.attributes['http.response.status_code'] === 302).length < 2 ||
        !lines.some((l) => l.includes('health diagnostic')) ||
        !lines.some((l) => l.startsWith('{"port"')) ||
        !receiver.spans.some((s) => s.name.startsWith('health verdict')) ||
        !receiver.spans.some((s) => s.name === 'tick caller' && s.statusCode === 2)
      ) {
        if (Date.now() > until) throw new Error(`no verdict in time: ${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const { probe } = JSON.parse(lines.find((l) => l.startsWith('{"port"')) ?? '{}') as { probe: number };
      const debug = await (await fetch(`http://127.0.0.1:${probe}/debug/diagnostics`)).text();
      const lifelineLogs = lines.filter((l) => l.includes('"name":"lifeline"'));
      const exported = JSON.stringify(receiver.spans);
      // Every planted secret, by name, that reached an export, a log line or the debug page: none.
      const everything = [exported, lifelineLogs.join('\n'), debug].join('\n');
      const leaked = Object.entries({ ...secrets, ...planted }).filter(([, value]) => everything.includes(value));
      expect(leaked.map(([name]) => name)).toEqual([]);
      // The planted material really went through: headers recorded, the error recorded, the dump made.
      expect(exported).toContain('http.request.header.authorization');
      expect(exported).toContain('http.request.header.cookie');
      expect(exported).toContain('upstream refused https://db.internal/x password=REDACTED');
      expect(exported).toContain('token=REDACTED');
      expect(lifelineLogs.some((l) => l.includes('health diagnostic'))).toBe(true);
      expect(debug).toContain('/stuck');
      // …and so did the eight forms, each still recognisable with its secret replaced.
      const callback = receiver.spans.find((s) => s.name.startsWith('GET /callback'));
      expect(callback?.name).toBe('GET /callback?token=REDACTED');
      expect(JSON.stringify(callback?.events)).toContain(String.raw`\"refresh_token\":\"REDACTED\"`);
      expect(JSON.stringify(callback?.events)).toContain('Authorization: Token REDACTED');
      expect(callback?.statusMessage).toBe('login failed for bob: password="REDACTED"');
      expect(callback?.attributes['app.seen']).toBe('connect.sid=REDACTED; theme=dark');
      expect(callback?.attributes['app.forwarded']).toBe('forwarding REDACTED upstream');
      expect(receiver.spans.find((s) => s.name === 'SELECT users')?.attributes['db.query.text']).toBe(
        'SELECT 1 /* host=db user=app password=REDACTED */',
      );
      expect(exported).toContain('/app;jsessionid=REDACTED/x?%74oken=REDACTED&page=1');
      // …and the fourteen later forms, through the SDK's own instrumentations where they record them.
      const later = receiver.spans.find((s) => s.name === 'later shapes');
      expect(later?.attributes['db.password']).toBe('REDACTED');
      expect(later?.attributes['app.token_count']).toBe('5');
      expect(later?.attributes['app.note']).toBe('sent X-API-Key:REDACTED and Bearer:REDACTED; passwordless=true author=Ada');
      expect(later?.attributes['http.request.body']).toBe('<login><user>bob</user><password>REDACTED</password></login>');
      expect(JSON.stringify(later?.events)).toContain('connect to admin:REDACTED@db.internal:5432 failed');
      expect(JSON.stringify(later?.events)).toContain('-----BEGIN RSA PRIVATE KEY-----REDACTED-----END RSA PRIVATE KEY-----');
      expect(exported).toContain('https://app.example/cb#access_token=REDACTED&state=1'); // a captured Location
      expect(exported).toContain('https://app.example/p?access_token=REDACTED'); // a captured Referer
      expect(exported).toContain('?a=1;token=REDACTED&%2574oken=REDACTED');
    } finally {
      child.kill('SIGKILL');
      await receiver.close();
    }
  }, 40_000);
});
