// What the fault and e2e suites need from the machine, checked before any test starts: each missing
// thing is one line saying what it is and how `bash .ci/run` provides it, instead of a stack trace
// minutes into the run. Usage: node test/preflight.mjs faults|e2e|db
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

const suite = process.argv[2];
const readOr = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};
const has = (command, args = ['--version']) => spawnSync(command, args, { stdio: 'ignore' }).status === 0;
const jaegerBuilt = () => spawnSync('bash', ['-c', 'ls .cache/bin/jaeger-* >/dev/null 2>&1']).status === 0;
const DB_PACKAGES =
  'install the Debian packages postgresql mariadb-server redis-server (apt-get install postgresql mariadb-server redis-server), as .ci/run does';
const ferretdbBuilt = () => spawnSync('bash', ['-c', 'ls .cache/bin/ferretdb-* >/dev/null 2>&1']).status === 0;
const collectorBuilt = () => spawnSync('bash', ['-c', 'ls .cache/bin/lifeline-otelcol-* >/dev/null 2>&1']).status === 0;

/** [what, present, how .ci/run provides it] */
const needs = {
  faults: [
    ['root (network namespaces and iptables)', () => process.getuid?.() === 0, 'run it as root, as CI does: sudo bash .ci/run'],
    ['iproute2 (`ip`)', () => has('ip', ['-V']), ".ci/run installs Debian's iproute2 (apt-get install iproute2)"],
    [
      "a cgroup CPU controller (the CPU-quota test: /sys/fs/cgroup/cpu, or cgroup v2's cpu)",
      () => existsSync('/sys/fs/cgroup/cpu/tasks') || /\bcpu\b/.test(readOr('/sys/fs/cgroup/cgroup.controllers')),
      'run it on a Linux machine, as root (containers usually hide the cgroup tree)',
    ],
    ['iptables', () => has('iptables', ['--version']), ".ci/run installs Debian's iptables (apt-get install iptables)"],
    [
      'Go, or a Jaeger already built in .cache/bin',
      () => jaegerBuilt() || has('go', ['version']),
      '.ci/run builds Jaeger from the Go module proxy (otel-collector/build-jaeger.sh): install Go',
    ],
  ],
  e2e: [
    [
      'Go, or a Jaeger already built in .cache/bin',
      () => jaegerBuilt() || has('go', ['version']),
      '.ci/run builds Jaeger from the Go module proxy (otel-collector/build-jaeger.sh): install Go',
    ],
    [
      'Go, or lifeline-otelcol already built in .cache/bin',
      () => collectorBuilt() || has('go', ['version']),
      '.ci/run builds it with the OpenTelemetry Collector Builder (otel-collector/build-collector.sh): install Go',
    ],
    [
      'Chromium (the Jaeger UI test)',
      () => existsSync(process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'),
      ".ci/run installs Debian's chromium (apt-get install chromium), or set CHROMIUM_PATH",
    ],
  ],
  // The servers test/support/databases.ts starts (the same paths).
  db: [
    [
      'PostgreSQL 15 (/usr/lib/postgresql/15/bin/initdb, postgres; psql)',
      () => ['/usr/lib/postgresql/15/bin/initdb', '/usr/lib/postgresql/15/bin/postgres', '/usr/bin/psql'].every((path) => existsSync(path)),
      DB_PACKAGES,
    ],
    [
      'MariaDB (mariadb-install-db, mariadbd, mariadb)',
      () => ['/usr/bin/mariadb-install-db', '/usr/sbin/mariadbd', '/usr/bin/mariadb'].every((path) => existsSync(path)),
      DB_PACKAGES,
    ],
    ['Redis (redis-server)', () => existsSync('/usr/bin/redis-server'), DB_PACKAGES],
    [
      'Go, or FerretDB (the MongoDB-wire server) already built in .cache/bin',
      () => ferretdbBuilt() || has('go', ['version']),
      '.ci/run builds FerretDB from the Go module proxy (otel-collector/build-ferretdb.sh): install Go',
    ],
    ['setpriv (util-linux: servers die with the test process)', () => has('setpriv', ['--version']), 'install util-linux'],
    [
      'the postgres system user (PostgreSQL refuses to run as root)',
      () => process.getuid?.() !== 0 || spawnSync('id', ['-u', 'postgres'], { stdio: 'ignore' }).status === 0,
      DB_PACKAGES,
    ],
  ],
};

// The blackhole plan's pg and ioredis phases run PostgreSQL and Redis of their own.
needs.faults.push(...needs.db);
const list = needs[suite];
if (list === undefined) {
  console.error(`usage: node test/preflight.mjs ${Object.keys(needs).join('|')}`);
  process.exit(2);
}
const missing = list.filter(([, present]) => !present());
for (const [what, , how] of missing) console.error(`test:${suite} needs ${what}: ${how}`);
process.exit(missing.length === 0 ? 0 : 1);
