// Bytes received but not yet parsed, kept as a list of chunks so that feeding one byte at a time
// does not re-copy a large partial element on every push (parsers wait until `length` is enough).
// Taking moves a read position in the first chunk on (no view made of what is left), and parsers
// may read headers in place (contiguous() and start): each view or copy made per unit costs.

/** Bytes kept free in front of every client piece (pieceCopy). A recorder's piece often ends a byte
 * or a few into the next element (Chromium's, after every WebM piece): the queue copies that leftover
 * in front of the next piece instead of copying the whole piece again to join them. */
export const HEADROOM = 16;
/** The memory of the newest piece pieceCopy made, until a queue takes it: only its first taker may
 * write into its headroom, and only once. */
let fresh: ArrayBufferLike | undefined;

/** A client's piece copied into memory of its own (never a pool, which a kept unit would pin), with
 * HEADROOM free bytes in front of it that the first queue it is pushed to may use. */
export function pieceCopy(src: Uint8Array): Buffer {
  const b = Buffer.allocUnsafeSlow(HEADROOM + src.byteLength);
  b.set(src, HEADROOM);
  fresh = b.buffer;
  return b.subarray(HEADROOM);
}

export class ByteQueue {
  private chunks: Buffer[] = [];
  private pos = 0; // where the queue starts in chunks[0]
  length = 0;
  /** Bytes taken so far: where the next byte sits in the stream (for error messages). */
  offset = 0;

  push(b: Buffer): void {
    if (b.length === 0) return;
    const headroom = b.buffer === fresh && b.byteOffset === HEADROOM;
    if (headroom) fresh = undefined;
    if (headroom && this.length > 0 && this.length <= HEADROOM) return this.prepend(b);
    this.chunks.push(b);
    this.length += b.length;
  }

  /** The few bytes queued are copied into the headroom in front of `b`, which becomes the one chunk. */
  private prepend(b: Buffer): void {
    const whole = Buffer.from(b.buffer, HEADROOM - this.length, this.length + b.length);
    let at = 0;
    for (let i = 0; i < this.chunks.length; i++) at += this.chunks[i].copy(whole, at, i === 0 ? this.pos : 0);
    this.chunks = [whole];
    this.pos = 0;
    this.length += b.length;
  }

  /** Where the queue's first byte sits in the buffer contiguous() returns. */
  get start(): number {
    return this.pos;
  }

  /** A buffer that holds the first n bytes (n ≤ length) in one piece from `start`, followed by
   * nothing that is not queued: read them in place. */
  contiguous(n: number): Buffer {
    if (n > this.length) throw new RangeError('peek past the end');
    if (this.chunks[0].length - this.pos < n) this.join(n);
    return this.chunks[0];
  }

  /** The first n bytes (n ≤ length) as one contiguous buffer, without consuming them. */
  peek(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0); // an empty queue has no first chunk
    const b = this.contiguous(n);
    return b.subarray(this.pos, this.pos + n);
  }

  /** Where `byte` next occurs at or after `from`, searched chunk by chunk (nothing joined); -1: not queued. */
  indexOf(byte: number, from: number): number {
    let base = -this.pos; // the queue position of the current chunk's first byte
    for (const c of this.chunks) {
      if (from < base + c.length) {
        const i = c.indexOf(byte, Math.max(0, from - base));
        if (i >= 0) return base + i;
      }
      base += c.length;
    }
    return -1;
  }

  /** Up to n bytes from `at` as one buffer: a view within a chunk, a small copy across two. */
  window(at: number, n: number): Buffer {
    let base = -this.pos,
      i = 0;
    while (i < this.chunks.length && at >= base + this.chunks[i].length) base += this.chunks[i++].length;
    const end = Math.min(this.length, at + n);
    if (i === this.chunks.length || end <= base + this.chunks[i].length)
      return (this.chunks[i] ?? Buffer.alloc(0)).subarray(at - base, end - base);
    const out = Buffer.allocUnsafe(end - at);
    for (let got = 0; got < out.length; i++, base += this.chunks[i - 1].length) {
      got += this.chunks[i].copy(out, got, Math.max(0, at - base));
    }
    return out;
  }

  /** Consumes the first n bytes. */
  take(n: number): Buffer {
    const out = this.peek(n);
    if (n === 0) return out;
    this.pos += n;
    if (this.pos === this.chunks[0].length) {
      this.chunks.shift();
      this.pos = 0;
    }
    this.length -= n;
    this.offset += n;
    return out;
  }

  /** Consumes the first n bytes (n ≤ length) without a view of them: read in place before. */
  skip(n: number): void {
    this.length -= n;
    this.offset += n;
    this.pos += n;
    while (this.chunks.length > 0 && this.pos >= this.chunks[0].length) {
      this.pos -= this.chunks[0].length;
      this.chunks.shift();
    }
  }

  takeAll(): Buffer {
    return this.take(this.length);
  }

  /** Joins the chunks that hold the first n bytes into one. Whole chunks: a unit that straddles two
   * messages is copied with the rest of the second, and the units after it are views of that copy,
   * so a replay that keeps them keeps each byte once (joining the unit alone would leave the whole
   * second message held by its other units beside the copy). Not from Node's shared pool: a kept
   * unit would pin an 8 KiB pool slab. */
  private join(n: number): void {
    const parts = [this.chunks[0].subarray(this.pos)];
    let have = parts[0].length,
      i = 1;
    while (have < n) {
      parts.push(this.chunks[i]);
      have += this.chunks[i++].length;
    }
    const joined = Buffer.allocUnsafeSlow(have);
    let at = 0;
    for (const p of parts) at += p.copy(joined, at);
    this.chunks.splice(0, i, joined);
    this.pos = 0;
  }
}
