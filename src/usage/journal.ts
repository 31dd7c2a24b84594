// Bounded append-only journal of ledger events for when Redis cannot take them. Written only by
// the ledger's single writer loop, so no locking inside the process; the directory belongs to one
// gateway process, which holds its lock (journal-lock.ts) from open to close. When full it refuses the newest events (the journal stays a
// contiguous, ordered prefix) and counts them as dropped.
// A record is one line: the event's JSON, a tab, and the first 8 hex digits of the JSON's SHA-256.
// A line that does not check out (cut short, changed on disk) is never replayed. A write that fails
// part way (a full disk) is cut back to the last whole record, and a torn tail left by a crash is
// cut at open, so appends always start on a record boundary and the events written are exactly
// those the journal counts. Lines without a tab are the format before checksums: plain JSON.
import { createHash } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { logger } from '../telemetry/index.js';
import { JournalLock, type LockTiming } from './journal-lock.js';
import type { LedgerEvent } from './model.js';

export interface JournalLimits {
  maxEvents: number;
  maxBytes: number;
  /** the directory lock's heartbeat and stale period (defaults in journal-lock.ts) */
  lock?: LockTiming;
}

/** Usage records are the tenants' business: the journal is readable by the gateway's user only. */
const FILE_MODE = 0o600;

export class Journal {
  private constructor(
    private readonly file: string,
    private readonly limits: JournalLimits,
    private depth_: number,
    private bytes: number,
    private readonly lock: JournalLock,
  ) {}

  /** Throws JournalLocked when another live process (or this one) holds `dir`. */
  static async open(dir: string, limits: JournalLimits): Promise<Journal> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const lock = await JournalLock.acquire(dir, limits.lock);
    try {
      return await Journal.load(dir, limits, lock);
    } catch (err) {
      await lock.release();
      throw err;
    }
  }

  private static async load(dir: string, limits: JournalLimits, lock: JournalLock): Promise<Journal> {
    const file = join(dir, 'usage-journal.jsonl');
    await chmod(file, FILE_MODE).catch(() => undefined); // one an older version wrote with the umask's mode
    const data = await readFile(file).catch(() => Buffer.alloc(0));
    const whole = data.lastIndexOf(0x0a) + 1;
    if (whole < data.length) {
      // A crash mid-write: the torn record is cut so the next append starts on a boundary.
      logger.warn({ file, bytes: data.length - whole }, 'usage journal: cutting a torn last record');
      await truncate(file, whole);
    }
    return new Journal(file, limits, parse(data.subarray(0, whole).toString('utf8'), file).length, whole, lock);
  }

  /** Gives the directory back; what the journal holds stays for the next process to replay. */
  close(): Promise<void> {
    return this.lock.release();
  }

  get depth(): number {
    return this.depth_;
  }

  /**
   * Appends in order and syncs to disk; returns how many events were not journaled: those past the
   * bounds, and those a failed write (a full disk) did not store whole. The others are in the file.
   */
  async append(events: LedgerEvent[]): Promise<number> {
    const lines: string[] = [];
    const ends: number[] = []; // file size after each record
    let bytes = this.bytes;
    for (const e of events) {
      const line = frame(e);
      const size = Buffer.byteLength(line);
      if (this.depth_ + lines.length + 1 > this.limits.maxEvents || bytes + size > this.limits.maxBytes) break;
      lines.push(line);
      bytes += size;
      ends.push(bytes);
    }
    if (lines.length === 0) return events.length;
    const written = await this.write(lines.join(''), ends);
    this.depth_ += written;
    return events.length - written;
  }

  /** Writes records ending at `ends`; after a failure keeps the whole ones written and cuts the rest. */
  private async write(text: string, ends: number[]): Promise<number> {
    const fh = await open(this.file, 'a', FILE_MODE);
    try {
      await fh.truncate(this.bytes); // whatever a failed write left after the last record
      await fh.appendFile(text);
      await fh.datasync();
      this.bytes = ends[ends.length - 1];
      return ends.length;
    } catch (err) {
      const size = await fh.stat().then(
        (s) => s.size,
        () => this.bytes,
      );
      const kept = ends.filter((end) => end <= size).length;
      const boundary = kept > 0 ? ends[kept - 1] : this.bytes;
      await fh.truncate(boundary).catch(() => undefined); // failing that, the next write cuts it
      this.bytes = boundary;
      logger.error(
        { err: (err as Error).message, written: kept, refused: ends.length - kept },
        'usage journal write failed part way',
      );
      return kept;
    } finally {
      await fh.close();
    }
  }

  readAll(): Promise<LedgerEvent[]> {
    return readFile(this.file, 'utf8').then(
      (text) => parse(text, this.file),
      () => [],
    );
  }

  /** Replaces the journal with `events` (what is left after a partial replay), atomically. */
  async rewrite(events: LedgerEvent[]): Promise<void> {
    if (events.length === 0) return this.clear();
    const text = events.map(frame).join('');
    const tmp = this.file + '.tmp';
    try {
      await writeFile(tmp, text, { flush: true, mode: FILE_MODE });
    } catch (err) {
      await rm(tmp, { force: true });
      throw err; // the journal as it was stays, whole
    }
    await rename(tmp, this.file);
    this.depth_ = events.length;
    this.bytes = Buffer.byteLength(text);
  }

  async clear(): Promise<void> {
    await rm(this.file, { force: true });
    this.depth_ = 0;
    this.bytes = 0;
  }
}

const checksum = (json: string): string => createHash('sha256').update(json).digest('hex').slice(0, 8);

/** One record: JSON (which escapes any tab inside it), a tab, its checksum. */
function frame(e: LedgerEvent): string {
  const json = JSON.stringify(e);
  return `${json}\t${checksum(json)}\n`;
}

/** The records of whole lines that check out, in order; others are skipped and logged. */
function parse(text: string, file: string): LedgerEvent[] {
  const events: LedgerEvent[] = [];
  let skipped = 0;
  for (const line of text.split('\n')) {
    if (!line) continue;
    const tab = line.lastIndexOf('\t');
    const json = tab < 0 ? line : line.slice(0, tab);
    try {
      if (tab >= 0 && checksum(json) !== line.slice(tab + 1)) throw new Error('checksum');
      events.push(JSON.parse(json) as LedgerEvent);
    } catch {
      skipped++;
    }
  }
  if (skipped > 0)
    logger.warn({ file, skipped }, 'usage journal: skipping records that are cut short or fail their checksum');
  return events;
}
