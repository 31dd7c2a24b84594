// A replay group's bytes as few objects: units that lie end to end in memory (the units of one
// client piece, the usual case) share one view, and each unit's end is a number. A view per unit
// was an object per Opus packet kept for seconds (about 100 a session with 20 ms packets), promoted
// by V8 and freed only by a major GC; the per-unit views are made again only for a replay.
import type { Group } from './format.js';

const EMPTY = Buffer.alloc(0);

export class KeptGroup<C> implements Group<C> {
  /** runs of contiguous bytes, in order: each run's first unit (its memory and start) and its length */
  private readonly runs: Buffer[] = [];
  private readonly runBytes: number[] = [];
  /** each unit's end, counted in bytes from the group's start */
  private readonly ends: number[] = [];
  bytes = 0;
  start?: number;
  end?: number;

  constructor(
    readonly ctx: C,
    readonly at: number | undefined,
  ) {}

  /** A unit's bytes, after the ones kept. */
  push(b: Buffer): void {
    if (b.length > 0) this.extend(b);
    this.bytes += b.length;
    this.ends.push(this.bytes);
  }

  /** One view per unit, in order (made anew on every read). */
  get units(): Buffer[] {
    const out: Buffer[] = [];
    let r = 0,
      runStart = 0,
      from = 0;
    for (const end of this.ends) {
      if (end === from) {
        out.push(EMPTY);
        continue;
      }
      while (from >= runStart + this.runBytes[r]) runStart += this.runBytes[r++];
      const run = this.runs[r];
      out.push(Buffer.from(run.buffer, run.byteOffset + from - runStart, end - from));
      from = end;
    }
    return out;
  }

  /** The last run grown over `b` when `b` follows it in memory (a count, no new view), else a new run. */
  private extend(b: Buffer): void {
    const last = this.runs.length - 1,
      run = this.runs[last];
    if (run !== undefined && run.buffer === b.buffer && run.byteOffset + this.runBytes[last] === b.byteOffset)
      this.runBytes[last] += b.length;
    else {
      this.runs.push(b);
      this.runBytes.push(b.length);
    }
  }
}
