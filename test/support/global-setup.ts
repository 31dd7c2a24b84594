// vitest globalSetup, run once in vitest's own process around the whole run. The run gets a temp
// dir of its own, given to every test process (and what they spawn) as TMPDIR and SGW_TEST_RUN.
// The teardown is the backstop for what afterAll hooks miss (a failed or timed-out file, a killed
// worker): it kills every process this run started that is still alive, then removes the dir.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { delay } from './wait.js';

function read(path: string, f: (p: string) => string): string {
  try {
    return f(path);
  } catch {
    return ''; // gone, or not ours to read
  }
}

/** /proc/PID/stat after the command name: state, ppid, ... (empty when the process is gone). */
function stat(pid: number): string[] {
  const s = read(`/proc/${pid}/stat`, (p) => readFileSync(p, 'latin1'));
  return s ? s.slice(s.lastIndexOf(')') + 2).split(' ') : [];
}
const alive = (pid: number) => (stat(pid)[0] ?? 'Z') !== 'Z'; // a zombie is as good as gone

/** Processes started by this run: they carry its marker in their environment, or (redis-server,
 * whose process title overwrites its environment) run in a directory inside its temp dir. The
 * vitest workers (direct children of this process) are vitest's to end. */
function leftovers(runDir: string): Array<{ pid: number; cmd: string }> {
  const marker = `SGW_TEST_RUN=${runDir}\0`;
  const found: Array<{ pid: number; cmd: string }> = [];
  for (const name of read('/proc', (p) => readdirSync(p).join('\n')).split('\n')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) continue;
    const fields = stat(pid);
    if (!fields.length || Number(fields[1]) === process.pid) continue;
    const ours =
      read(`/proc/${pid}/environ`, (p) => readFileSync(p, 'latin1')).includes(marker) ||
      read(`/proc/${pid}/cwd`, readlinkSync).startsWith(runDir + '/');
    if (ours)
      found.push({
        pid,
        cmd: read(`/proc/${pid}/cmdline`, (p) => readFileSync(p, 'latin1'))
          .replaceAll('\0', ' ')
          .trim(),
      });
  }
  return found;
}

export function setup(): (() => Promise<void>) | undefined {
  // Each vitest project runs the global setup; the first one in this process sets the run up.
  if (process.env.SGW_TEST_RUN_PID === String(process.pid)) return undefined;
  const runDir = mkdtempSync(join(tmpdir(), 'sgw-test-run-'));
  process.env.SGW_TEST_RUN_PID = String(process.pid);
  process.env.SGW_TEST_RUN = runDir;
  process.env.TMPDIR = runDir;
  return async () => {
    const left = leftovers(runDir);
    for (const { pid } of left) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    if (left.length) {
      process.stderr.write(
        `test teardown: killed ${left.length} process(es) the run left alive:\n${left.map((p) => `  ${p.pid} ${p.cmd.slice(0, 120)}`).join('\n')}\n`,
      );
    }
    for (let i = 0; i < 40 && left.some((p) => alive(p.pid)); i++) await delay(50);
    rmSync(runDir, { recursive: true, force: true });
  };
}
