// The usage journal's directory belongs to one gateway process: two processes appending to, replaying
// and clearing one file lose each other's events. The lock is a file created exclusively (O_EXCL)
// that says who holds it (pid; host, boot and pid namespace, so that another process can tell
// whether it sees that pid; a random token), touched every HEARTBEAT_MS while held. A process takes
// it over only from a holder that is gone: a pid that no longer runs, seen from the same host, boot
// and pid namespace, or a lock untouched for STALE_MS (a holder in another container or on another
// host, or one whose pid was reused). So a crash never stops the next start: it takes the lock over
// at once when it can see the pid, within STALE_MS otherwise. Written by hand: no library in the
// project's dependencies locks files, and the pid check is what makes a restart after a crash quick.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { link, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { logger } from '../telemetry/index.js';

const FILE = 'usage-journal.lock';
export const HEARTBEAT_MS = 2000;
export const STALE_MS = 10_000;

interface Holder {
  pid: number;
  /** host, boot and pid namespace: a pid means this process only where they are the same */
  machine: string;
  token: string;
  since: string;
}

export interface LockTiming {
  heartbeatMs?: number;
  staleMs?: number;
}

/** The journal directory is held by another live process (or by this one already). */
export class JournalLocked extends Error {
  constructor(dir: string, holder: Holder | 'this process' | undefined) {
    const who =
      holder === 'this process'
        ? 'this process already'
        : `another gateway process${holder ? ` (pid ${holder.pid} on ${holder.machine.split('|')[0]}, since ${holder.since})` : ''}`;
    super(
      `the usage journal directory ${dir} (USAGE_JOURNAL_DIR) is held by ${who}; give each gateway process a directory of its own`,
    );
    this.name = 'JournalLocked';
  }
}

/** Directories this process holds: a second journal on one of them is refused like another process's. */
const heldHere = new Set<string>();

const readOr = (file: string): string => {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
};
/** Where this process's pid means this process. */
const MACHINE = [hostname(), readOr('/proc/sys/kernel/random/boot_id'), readOr('/proc/self/ns/pid')].join('|');

export class JournalLock {
  private timer: NodeJS.Timeout | undefined;
  private beating = false;

  private constructor(
    private readonly file: string,
    private readonly me: Holder,
    heartbeatMs: number,
    private readonly dir: string,
  ) {
    this.timer = setInterval(() => void this.beat(), heartbeatMs).unref();
  }

  /** Takes `dir`'s lock, waiting up to a stale period for a holder it cannot see to prove alive or gone. */
  static async acquire(dir: string, timing: LockTiming = {}): Promise<JournalLock> {
    const heartbeatMs = timing.heartbeatMs ?? HEARTBEAT_MS;
    const staleMs = timing.staleMs ?? STALE_MS;
    const abs = resolve(dir);
    const file = join(abs, FILE);
    const me: Holder = { pid: process.pid, machine: MACHINE, token: randomUUID(), since: new Date().toISOString() };
    const deadline = Date.now() + staleMs + heartbeatMs;
    for (;;) {
      if (heldHere.has(abs)) throw new JournalLocked(abs, 'this process');
      if (await create(file, me)) {
        heldHere.add(abs);
        return new JournalLock(file, me, heartbeatMs, abs);
      }
      const held = await readHeld(file);
      if (!held) continue; // released meanwhile
      const verdict = judge(held, staleMs);
      if (verdict === 'gone') {
        logger.warn(
          { dir: abs, holder: held.holder?.pid },
          'usage journal: taking over the lock of a gateway process that is gone',
        );
        await takeOver(file, held.raw, me.token);
      } else if (verdict === 'alive' || Date.now() > deadline) {
        throw new JournalLocked(abs, held.holder);
      } else {
        await delay(Math.min(500, heartbeatMs));
      }
    }
  }

  /** Gives the directory back (only if the lock is still this process's). */
  async release(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    heldHere.delete(this.dir);
    if ((await readHeld(this.file))?.holder?.token === this.me.token) await rm(this.file, { force: true });
  }

  /** Touches the lock; a lock that is no longer this process's is said once, loudly. */
  private async beat(): Promise<void> {
    if (this.beating || !this.timer) return;
    this.beating = true;
    try {
      if ((await readHeld(this.file))?.holder?.token !== this.me.token) {
        clearInterval(this.timer);
        logger.error(
          { dir: this.dir },
          'usage journal: another gateway process took this directory over (this one stalled past the stale period); USAGE_JOURNAL_DIR must belong to one process',
        );
        return;
      }
      const now = new Date();
      await utimes(this.file, now, now);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'usage journal: lock heartbeat failed');
    } finally {
      this.beating = false;
    }
  }
}

/** true: created, this process holds it. false: one exists. */
async function create(file: string, me: Holder): Promise<boolean> {
  try {
    await writeFile(file, JSON.stringify(me), { flag: 'wx', mode: 0o600 });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

interface Held {
  raw: string;
  holder?: Holder;
  ageMs: number;
}

/** The lock as found, or undefined when there is none. Content that does not parse (a crash while
 *  it was written) has no holder: only its age can say it is stale. */
async function readHeld(file: string): Promise<Held | undefined> {
  try {
    const [raw, st] = await Promise.all([readFile(file, 'utf8'), stat(file)]);
    let holder: Holder | undefined;
    try {
      const h = JSON.parse(raw) as Partial<Holder>;
      if (typeof h.pid === 'number' && typeof h.machine === 'string' && typeof h.token === 'string')
        holder = h as Holder;
    } catch {
      holder = undefined;
    }
    return { raw, holder, ageMs: Date.now() - st.mtimeMs };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** gone: take it over. alive: refuse. unknown: a holder this process cannot see, touched lately. */
function judge(held: Held, staleMs: number): 'gone' | 'alive' | 'unknown' {
  if (held.ageMs > staleMs) return 'gone'; // a live holder touches it every heartbeat
  const h = held.holder;
  if (!h || h.machine !== MACHINE) return 'unknown';
  // Our own pid, and not held here: a process before this one that had it (a restarted container).
  if (h.pid === process.pid || !running(h.pid)) return 'gone';
  return 'alive';
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Moves the stale lock aside and removes it, unless another process replaced it meanwhile (then it
 *  is put back, and the caller looks again). */
async function takeOver(file: string, staleRaw: string, token: string): Promise<void> {
  const aside = `${file}.${token}`;
  try {
    await rename(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if ((await readFile(aside, 'utf8').catch(() => '')) !== staleRaw) await link(aside, file).catch(() => undefined);
  await rm(aside, { force: true });
}
