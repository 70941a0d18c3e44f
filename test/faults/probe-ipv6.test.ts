import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/node.js';

// In the fault suite: IPv6 peers of several /64s need addresses of their own, so a network
// namespace (root). The probe server's per-address share counts an IPv6 peer per /64, as one host
// or one client's privacy addresses are.

/** Inside a network namespace of its own (needs root), with these addresses on its loopback. */
const SAME_64 = ['fd00:1:0:1::a', 'fd00:1:0:1::b', 'fd00:1:0:1:ffff::c'];
const OTHER_64 = 'fd00:1:0:2::a';

const PER_64 = `
import { connect } from 'node:net';
import { HealthCatalog, startProbeServer } from 'otel-lifeline';
const [same, other] = JSON.parse(process.argv.at(-1));
const health = new HealthCatalog();
const probes = await startProbeServer({
  health, port: 0, host: '::1', maxConnectionsPerAddress: 2, maxOverflowConnections: 0,
  logger: { warn() {}, info() {}, debug() {} },
});
const open = (from) => new Promise((resolve) => {
  const socket = connect({ port: probes.port, host: '::1', localAddress: from }, () => resolve(socket));
  socket.on('error', () => undefined);
});
/** Asks for /live on a connection: 'answered', or 'closed' if the server closed it unanswered. */
const ask = (socket) => new Promise((resolve) => {
  let answer = '';
  socket.on('data', (chunk) => { answer += chunk; if (answer.includes('}')) resolve('answered'); });
  socket.on('close', () => resolve(answer.startsWith('HTTP/1.1 200') ? 'answered' : 'closed'));
  socket.write('GET /live HTTP/1.1\\r\\nHost: probe\\r\\n\\r\\n');
});
const held = [await open(same[0]), await open(same[1])]; // silent: the /64's share of 2
const third = await open(same[2]);
const elsewhere = await open(other);
const result = { third: await ask(third), elsewhere: await ask(elsewhere) };
for (const socket of [...held, third, elsewhere]) socket.destroy();
await probes.close();
health.close();
console.log(JSON.stringify(result));
`;

describe('per-address shares of the probe server over IPv6', () => {
  it('counts an IPv6 peer per /64: a third silent client of one /64 past a share of 2 is refused, another /64 is answered', () => {
    const ns = `llp6${String(process.pid % 10_000)}`;
    const sh = (args: string[]) => execFileSync(args[0] as string, args.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
    sh(['ip', 'netns', 'add', ns]);
    try {
      sh(['ip', 'netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
      for (const address of [...SAME_64, OTHER_64])
        sh(['ip', 'netns', 'exec', ns, 'ip', '-6', 'addr', 'add', `${address}/128`, 'dev', 'lo', 'nodad']);
      const out = execFileSync(
        'ip',
        ['netns', 'exec', ns, process.execPath, '--input-type=module', '-e', PER_64, JSON.stringify([SAME_64, OTHER_64])],
        { cwd: ROOT, timeout: 15_000 },
      ).toString();
      expect(JSON.parse(out.trim().split('\n').at(-1) ?? '')).toEqual({ third: 'closed', elsewhere: 'answered' });
    } finally {
      sh(['ip', 'netns', 'del', ns]);
    }
  });
});
