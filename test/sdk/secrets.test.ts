import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/node.js';
import { otlpReceiver } from '../support/otlp-receiver.js';

const secret = (label: string) => `${label}-${randomBytes(6).toString('hex')}`;

describe('planted credentials never leave the process (README: When a component turns unhealthy)', () => {
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
        !lines.some((l) => l.includes('health diagnostic')) ||
        !receiver.spans.some((s) => s.name.startsWith('health verdict')) ||
        !receiver.spans.some((s) => s.name === 'tick caller' && s.statusCode === 2)
      ) {
        if (Date.now() > until) throw new Error(`no verdict in time: ${stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const { probe } = JSON.parse(lines[0] ?? '{}') as { probe: number };
      const debug = await (await fetch(`http://127.0.0.1:${probe}/debug/diagnostics`)).text();
      const lifelineLogs = lines.filter((l) => l.includes('"name":"lifeline"'));
      const exported = JSON.stringify(receiver.spans);
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
      expect(callback?.attributes['app.cookie_seen']).toBe('connect.sid=REDACTED; theme=dark');
      expect(callback?.attributes['app.forwarded']).toBe('forwarding REDACTED upstream');
      expect(receiver.spans.find((s) => s.name === 'SELECT users')?.attributes['db.query.text']).toBe(
        'SELECT 1 /* host=db user=app password=REDACTED */',
      );
      expect(exported).toContain('/app;jsessionid=REDACTED/x?%74oken=REDACTED&page=1');
      for (const value of [...Object.values(secrets), ...Object.values(planted)]) {
        expect(exported).not.toContain(value);
        expect(lifelineLogs.join('\n')).not.toContain(value);
        expect(debug).not.toContain(value);
      }
    } finally {
      child.kill('SIGKILL');
      await receiver.close();
    }
  }, 40_000);
});
