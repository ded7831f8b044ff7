// CPU time of processes from /proc (Linux): user + system, of a process and of the children it
// has waited for, so that a run can say how many CPU milliseconds each part (worker processes,
// Redis, PostgreSQL with its backends) spent per transfer.
import { readdirSync, readFileSync } from 'node:fs';

/** USER_HZ: the unit of the times in /proc/<pid>/stat (`getconf CLK_TCK`, 100 on Linux). */
export const CLOCK_TICKS_PER_S = 100;

interface ProcStat {
  readonly ppid: number;
  /** utime + stime + cutime + cstime, in clock ticks. */
  readonly ticks: number;
}

function procStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name is in parentheses and may hold spaces: the fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
  const at = (field: number) => Number(fields[field - 3]);
  return { ppid: at(4), ticks: at(14) + at(15) + at(16) + at(17) };
}

/** CPU milliseconds spent so far by these processes (those gone count 0). */
export function cpuMsOf(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) ticks += procStat(pid)?.ticks ?? 0;
  return (ticks * 1000) / CLOCK_TICKS_PER_S;
}

/** A process and every live descendant (PostgreSQL's postmaster and its backends). */
export function processTree(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat !== null) parents.set(Number(entry), stat.ppid);
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i += 1) {
    for (const [pid, ppid] of parents) if (ppid === tree[i]) tree.push(pid);
  }
  return tree;
}
