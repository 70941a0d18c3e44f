import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename } from 'node:path';

/** Most file descriptors looked at: the search runs once, when start-up finds the port taken. */
const MAX_LINKS = 20_000;

/** Who listens on a port: its pid when this process can see it, and how to name it in a line. */
export interface PortHolder {
  readonly pid?: number;
  /** `process 4242 (node)`, or a sentence saying it is out of sight (another container of the pod, another user). */
  readonly description: string;
}

/** Who listens on TCP `port`, from Linux's `/proc` (this network namespace's sockets, the processes this one can see). */
export function findPortHolder(port: number): PortHolder {
  try {
    const inodes = listeningInodes(port);
    if (inodes.size === 0) return { description: 'a process this one cannot see' };
    let links = 0;
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
      let fds: string[];
      try {
        fds = readdirSync(`/proc/${pid}/fd`);
      } catch {
        continue; // gone, or another user's
      }
      for (const fd of fds) {
        if (++links > MAX_LINKS) return { description: 'a process this one did not find' };
        let target: string;
        try {
          target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        } catch {
          continue;
        }
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode !== undefined && inodes.has(inode)) return { pid: Number(pid), description: `process ${pid} (${commandOf(pid)})` };
      }
    }
    return { description: "a process outside this one's view (another container, or another user's)" };
  } catch {
    return { description: 'a process this one cannot see' };
  }
}

/** Inodes of the sockets listening on `port`, from the kernel's tables for this network namespace. */
function listeningInodes(port: number): Set<string> {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'latin1');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDR:PORT; state 0A is LISTEN; inode is the tenth field.
      if (fields[1]?.endsWith(`:${hex}`) === true && fields[3] === '0A' && fields[9] !== undefined) inodes.add(fields[9]);
    }
  }
  return inodes;
}

/** The process's program, not its command line: arguments may hold credentials. */
function commandOf(pid: string): string {
  try {
    return basename(readlinkSync(`/proc/${pid}/exe`)).slice(0, 64);
  } catch {
    return 'unnamed';
  }
}
