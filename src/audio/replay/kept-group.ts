// A replay group's bytes as few objects: units that lie end to end in memory (the units of one
// client piece, the usual case) share one run, kept as its memory and offsets (not a view of it), and
// each unit's end is a number. Whatever the replay keeps for seconds is promoted by V8 to its old
// generation and freed only by a major GC: a view per unit was an object per Opus packet, and a group
// with arrays of its own was about 600 bytes per client piece. A released group is cleared and used
// again for a later one (its arrays keep their room), so a session streaming at real time makes no
// new object here; the per-unit views are made only for a replay.
import type { Group } from './format.js';

const EMPTY = Buffer.alloc(0);
const NO_MEMORY = new ArrayBuffer(0);

export class KeptGroup<C> implements Group<C> {
  /** runs of contiguous bytes, in order: each run's memory, where it starts there, and its length */
  private readonly memory: ArrayBufferLike[] = [];
  private readonly runAt: number[] = [];
  private readonly runBytes: number[] = [];
  private runs = 0;
  /** each unit's end, counted in bytes from the group's start */
  private readonly ends: number[] = [];
  private count = 0;
  bytes = 0;
  start?: number;
  end?: number;
  ctx: C;
  at: number | undefined;

  constructor(ctx: C, at: number | undefined) {
    this.ctx = ctx;
    this.at = at;
  }

  /** A cleared group (clear()) as a new one of `ctx`, starting at input offset `at`. */
  reuse(ctx: C, at: number | undefined): this {
    this.ctx = ctx;
    this.at = at;
    return this;
  }

  /** Lets go of its bytes and context (the group was dropped: nothing reads it until reuse()). */
  clear(): this {
    for (let i = 0; i < this.runs; i++) this.memory[i] = NO_MEMORY;
    this.ctx = undefined as C; // an old chained Ogg stream's headers, say: not held by a spare
    this.runs = 0;
    this.count = 0;
    this.bytes = 0;
    this.start = undefined;
    this.end = undefined;
    return this;
  }

  /** A unit's bytes, after the ones kept. */
  push(b: Buffer): void {
    if (b.length > 0) this.extend(b);
    this.bytes += b.length;
    this.ends[this.count++] = this.bytes;
  }

  /** One view per unit, in order (made anew on every read). */
  get units(): Buffer[] {
    const out: Buffer[] = [];
    let r = 0,
      runStart = 0,
      from = 0;
    for (let i = 0; i < this.count; i++) {
      const end = this.ends[i];
      if (end === from) {
        out.push(EMPTY);
        continue;
      }
      while (from >= runStart + this.runBytes[r]) runStart += this.runBytes[r++];
      out.push(Buffer.from(this.memory[r], this.runAt[r] + from - runStart, end - from));
      from = end;
    }
    return out;
  }

  /** The last run grown over `b` when `b` follows it in memory (a count, nothing kept), else a new run. */
  private extend(b: Buffer): void {
    const last = this.runs - 1;
    if (last >= 0 && this.memory[last] === b.buffer && this.runAt[last] + this.runBytes[last] === b.byteOffset)
      this.runBytes[last] += b.length;
    else {
      this.memory[this.runs] = b.buffer;
      this.runAt[this.runs] = b.byteOffset;
      this.runBytes[this.runs++] = b.length;
    }
  }
}
