// A process tree's CPU time and resident memory, read from /proc (kernel and user time of every
// thread, so loader threads, worker threads and child processes all count).
import { readdirSync, readFileSync } from 'node:fs';

const TICK_S = 0.01; // CLK_TCK is 100 on Linux
const PAGE = 4096;

const read = (path: string) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
};

export function treePids(root: number): number[] {
  const out = [root];
  for (let i = 0; i < out.length; i++) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${out[i]}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      for (const c of read(`/proc/${out[i]}/task/${t}/children`).split(' ')) if (c.trim()) out.push(Number(c));
    }
  }
  return out;
}

/** User and system (kernel) CPU seconds of the whole tree. */
export function treeCpu(root: number): { user: number; system: number } {
  let user = 0,
    system = 0;
  for (const pid of treePids(root)) {
    const stat = read(`/proc/${pid}/stat`);
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from 3 on; utime is 14, stime 15
    if (f.length > 13) {
      user += Number(f[11]);
      system += Number(f[12]);
    }
  }
  return { user: user * TICK_S, system: system * TICK_S };
}

/** A field of /proc/PID/statm (pages) summed over the tree, bytes. */
function treeStatm(root: number, field: number): number {
  let pages = 0;
  for (const pid of treePids(root)) pages += Number(read(`/proc/${pid}/statm`).split(' ')[field] ?? 0) || 0;
  return pages * PAGE;
}

/** Resident set of the whole tree, bytes. */
export const treeRss = (root: number): number => treeStatm(root, 1);

/** Resident pages of the whole tree that are file-backed or shared (statm's third field: the
 * binary's and libraries' code touched so far, not memory the process allocated), bytes. */
export const treeSharedRss = (root: number): number => treeStatm(root, 2);

/** User + system CPU seconds of the whole tree. */
export function treeCpuSeconds(root: number): number {
  const c = treeCpu(root);
  return c.user + c.system;
}
