import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthCatalog, startProbeServer, type ProbeServer } from '../../src/index.js';
import { createTestHost, type TestHost } from '../support/netns.js';

let host: TestHost;
let probe: ProbeServer;
const health = new HealthCatalog();

beforeAll(async () => {
  host = createTestHost();
  probe = await startProbeServer({
    health,
    host: '0.0.0.0',
    port: 0,
    debugDiagnostics: true,
    logger: { warn: () => undefined, info: () => undefined, debug: () => undefined },
  });
});
afterAll(async () => {
  await probe.close();
  health.close();
  host.destroy();
});

/** Fetches `url` from inside the test host (another network namespace): a non-loopback client. */
async function fetchFromHost(url: string): Promise<number> {
  const child = host.spawn(process.execPath, [
    '-e',
    `fetch(${JSON.stringify(url)}).then((r) => console.log(r.status), (e) => console.log('error', e.cause?.code ?? e.message))`,
  ]);
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  await new Promise((resolve) => child.on('close', resolve));
  return Number(out.trim());
}

describe('/debug/diagnostics answers loopback clients only (docs/probes.md)', () => {
  it('refuses a client from another namespace (404), while its probes are served', async () => {
    expect(await fetchFromHost(`http://${host.localIp}:${probe.port}/live`)).toBe(200);
    expect(await fetchFromHost(`http://${host.localIp}:${probe.port}/debug/diagnostics`)).toBe(404); // not even shown to exist
  });

  it('answers the same endpoint over loopback', async () => {
    expect((await fetch(`http://127.0.0.1:${probe.port}/debug/diagnostics`)).status).toBe(200);
  });
});
