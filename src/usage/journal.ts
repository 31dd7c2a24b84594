// Bounded append-only journal of ledger events (JSON lines) for when Redis cannot take them.
// Written only by the ledger's single drain loop, so no locking inside the process; the
// directory must belong to one gateway process (one per pod). When full it refuses the newest
// events (the journal stays a contiguous, ordered prefix) and counts them as dropped.
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { logger } from '../telemetry/index.js';
import type { LedgerEvent } from './model.js';

export interface JournalLimits { maxEvents: number; maxBytes: number }

export class Journal {
  private constructor(
    private readonly file: string,
    private readonly limits: JournalLimits,
    private depth_: number,
    private bytes: number,
  ) {}

  static async open(dir: string, limits: JournalLimits): Promise<Journal> {
    await mkdir(dir, { recursive: true });
    const file = join(dir, 'usage-journal.jsonl');
    const events = await readEvents(file);
    const size = await stat(file).then((s) => s.size, () => 0);
    return new Journal(file, limits, events.length, size);
  }

  get depth(): number {
    return this.depth_;
  }

  /** Appends in order and syncs to disk; returns how many events were refused for lack of room. */
  async append(events: LedgerEvent[]): Promise<number> {
    const lines: string[] = [];
    let bytes = this.bytes;
    let depth = this.depth_;
    for (const e of events) {
      const line = JSON.stringify(e) + '\n';
      const size = Buffer.byteLength(line);
      if (depth + 1 > this.limits.maxEvents || bytes + size > this.limits.maxBytes) break;
      lines.push(line);
      bytes += size;
      depth += 1;
    }
    if (lines.length > 0) {
      const fh = await open(this.file, 'a');
      try {
        await fh.appendFile(lines.join(''));
        await fh.datasync();
      } finally {
        await fh.close();
      }
      this.bytes = bytes;
      this.depth_ = depth;
    }
    return events.length - lines.length;
  }

  readAll(): Promise<LedgerEvent[]> {
    return readEvents(this.file);
  }

  /** Replaces the journal with `events` (what is left after a partial replay), atomically. */
  async rewrite(events: LedgerEvent[]): Promise<void> {
    if (events.length === 0) return this.clear();
    const text = events.map((e) => JSON.stringify(e) + '\n').join('');
    const tmp = this.file + '.tmp';
    await writeFile(tmp, text, { flush: true });
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

async function readEvents(file: string): Promise<LedgerEvent[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return [];
  }
  const events: LedgerEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      events.push(JSON.parse(line) as LedgerEvent);
    } catch {
      // A line cut short by a crash mid-write; everything before it is intact.
      logger.warn({ file }, 'usage journal: skipping a truncated line');
    }
  }
  return events;
}
