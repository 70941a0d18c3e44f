import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';

/**
 * A host of the test's own: a network namespace joined to this one by a veth pair. Faults are real
 * packets dropped by iptables inside it, so a "blackholed" connect is exactly that: SYNs that no
 * one answers. Needs root, iproute2 and iptables (`.ci/run` installs iptables).
 */
export interface TestHost {
  readonly name: string;
  /** This namespace's address on the link. */
  readonly localIp: string;
  /** The test host's address. */
  readonly ip: string;
  /** Drops every TCP packet to `port` inside the host: connects and open connections hang. */
  blackhole(port: number): void;
  /** Removes the blackhole on `port`. */
  lift(port: number): void;
  /** Drops every TCP packet the host sends to `ip:port` (its outbound calls hang). */
  blackholeTo(ip: string, port: number): void;
  /** Removes that outbound blackhole. */
  liftTo(ip: string, port: number): void;
  /** Runs a command inside the host. */
  spawn(command: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcess;
  destroy(): void;
}

function run(args: string[]): void {
  execFileSync(args[0] as string, args.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
}

export function createTestHost(): TestHost {
  const id = `${process.pid % 10_000}${randomInt(100)}`;
  const name = `ll${id}`;
  const hostSide = `llh${id}`;
  const nsSide = `lln${id}`;
  const net = `10.${randomInt(64, 250)}.${randomInt(0, 250)}`;
  const localIp = `${net}.1`;
  const ip = `${net}.2`;
  run(['ip', 'netns', 'add', name]);
  try {
    run(['ip', 'link', 'add', hostSide, 'type', 'veth', 'peer', 'name', nsSide]);
    run(['ip', 'link', 'set', nsSide, 'netns', name]);
    run(['ip', 'addr', 'add', `${localIp}/30`, 'dev', hostSide]);
    run(['ip', 'link', 'set', hostSide, 'up']);
    run(['ip', 'netns', 'exec', name, 'ip', 'addr', 'add', `${ip}/30`, 'dev', nsSide]);
    run(['ip', 'netns', 'exec', name, 'ip', 'link', 'set', nsSide, 'up']);
    run(['ip', 'netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up']);
  } catch (err) {
    run(['ip', 'netns', 'del', name]);
    throw err;
  }
  const rule = (action: '-A' | '-D', port: number) => [
    'ip',
    'netns',
    'exec',
    name,
    'iptables',
    action,
    'INPUT',
    '-p',
    'tcp',
    '--dport',
    String(port),
    '-j',
    'DROP',
  ];
  const outbound = (action: '-A' | '-D', to: string, port: number) => [
    'ip',
    'netns',
    'exec',
    name,
    'iptables',
    action,
    'OUTPUT',
    '-p',
    'tcp',
    '-d',
    to,
    '--dport',
    String(port),
    '-j',
    'DROP',
  ];
  return {
    name,
    localIp,
    ip,
    blackhole: (port) => {
      run(rule('-A', port));
    },
    lift: (port) => {
      run(rule('-D', port));
    },
    blackholeTo: (to, port) => {
      run(outbound('-A', to, port));
    },
    liftTo: (to, port) => {
      run(outbound('-D', to, port));
    },
    spawn: (command, args, env) =>
      spawn('ip', ['netns', 'exec', name, command, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }),
    destroy: () => {
      try {
        run(['ip', 'link', 'del', hostSide]);
      } catch {
        // gone with the namespace already
      }
      run(['ip', 'netns', 'del', name]);
    },
  };
}
