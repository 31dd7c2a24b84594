// The replay audio of every session, copied into 4 KiB blocks drawn from one pool and given back as
// soon as finals release them. Kept as views of the client's pieces instead, each piece stayed alive
// for seconds, was promoted to V8's old generation and was freed only by a major GC: the process held
// several times the audio it kept. A growing buffer per session was tried and measured worse (it is
// reallocated as the kept audio swings with each final). A pooled block is reused at once, and a
// session holds at most one partly filled block more than its audio.
// Written here: spans must stay contiguous and go oldest first, which no pool library offers.

export const BLOCK_BYTES = 4096;
/** Spare blocks kept for reuse (4 MiB); a block freed beyond that is left to the GC. */
const SPARE_MAX = 1024;
const spare: Buffer[] = [];
const EMPTY = Buffer.alloc(0);

/** Spans copied into pooled blocks, in order; a block goes back once no kept span is in it. */
export class BlockStore {
  private blocks: Buffer[] = [];
  /** bytes used in the newest block */
  private used = 0;

  /** Bytes of blocks this store holds. */
  get bytes(): number {
    let n = 0;
    for (const b of this.blocks) n += b.length;
    return n;
  }

  /** `b` copied after the newest span; the view is valid until `free` is passed a later span. */
  put(b: Buffer): Buffer {
    const n = b.length;
    if (n === 0) return EMPTY;
    let last = this.blocks.at(-1);
    if (!last || this.used + n > last.length) {
      // A span bigger than a block gets a block of its own size (never pooled).
      last = n > BLOCK_BYTES ? Buffer.allocUnsafeSlow(n) : (spare.pop() ?? Buffer.allocUnsafeSlow(BLOCK_BYTES));
      this.blocks.push(last);
      this.used = 0;
    }
    b.copy(last, this.used);
    const view = last.subarray(this.used, this.used + n);
    this.used += n;
    return view;
  }

  /** The blocks before the one holding `oldest` (the oldest span still kept) go back to the pool;
   *  no span kept: all of them. A span not from this store frees nothing. */
  free(oldest: Buffer | undefined): void {
    const from = oldest ? this.blocks.findIndex((b) => b.buffer === oldest.buffer) : this.blocks.length;
    if (from <= 0) return;
    for (const b of this.blocks.splice(0, from))
      if (b.length === BLOCK_BYTES && spare.length < SPARE_MAX) spare.push(b);
    if (this.blocks.length === 0) this.used = 0;
  }
}
