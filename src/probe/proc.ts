import { readFileSync } from 'node:fs';

/** What Linux says of a process in `/proc/<pid>/stat`. */
export interface ProcStat {
  /** `R`, `S`, `D`, `Z` (exited, not yet reaped), … */
  readonly state: string;
  readonly ppid: number;
  /** Clock ticks after boot at which it started: with the pid, names one process for good (pids are reused). */
  readonly startTime: string;
}

/** `/proc/<pid>/stat`, or `undefined` where there is none (the process is gone, or this is not Linux). */
export function procStat(pid: number | 'self'): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${String(pid)}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // The command name is in parentheses and may hold spaces or parentheses itself: fields follow the last `)`.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const [state, ppid] = fields;
  const startTime = fields[19];
  if (state === undefined || ppid === undefined || startTime === undefined) return undefined;
  return { state, ppid: Number(ppid), startTime };
}

/** Whether `pid` is this process's parent, grandparent, … (Linux; false where it cannot be told). */
export function isAncestor(pid: number): boolean {
  let current = process.ppid;
  for (let depth = 0; depth < 64 && current > 1; depth++) {
    if (current === pid) return true;
    const stat = procStat(current);
    if (stat === undefined) return false;
    current = stat.ppid;
  }
  return current === pid;
}
