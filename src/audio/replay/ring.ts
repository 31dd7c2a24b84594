// The replay audio of one session, copied into one buffer that is reused as audio is released,
// rather than kept as views of the client's pieces. A kept view would keep its whole piece: pieces
// then live a second or more, are promoted to V8's old generation and are freed only by a major GC,
// so a process held several times the audio it keeps. Copied here, a piece dies young once it is
// sent, and a session's external memory is this buffer, sized near what it keeps.
// Written here: spans must stay contiguous and be dropped oldest first, which no pool library offers.

const STEP = 4096;
/** Smallest buffer a session keeps (a few of a browser's pieces); grown in steps of STEP. */
export const RING_MIN_BYTES = 4 * STEP;

const roundUp = (n: number) => Math.ceil(n / STEP) * STEP;

/** A FIFO of byte spans in one buffer that wraps: each span contiguous, the oldest freed first. */
export class AudioRing {
  private buf = Buffer.allocUnsafeSlow(RING_MIN_BYTES);
  private head = 0; // where the oldest live span starts
  private tail = 0; // where the next span goes
  private empty = true;

  get capacity(): number {
    return this.buf.length;
  }

  /** `b` copied after the newest span; undefined when no contiguous room is left (see `resize`). */
  put(b: Buffer): Buffer | undefined {
    const n = b.length,
      cap = this.buf.length;
    if (n === 0) return this.buf.subarray(this.tail, this.tail);
    let at: number;
    if (this.empty) at = n <= cap ? 0 : -1;
    else if (this.tail > this.head) at = this.tail + n <= cap ? this.tail : n <= this.head ? 0 : -1;
    else at = this.tail + n <= this.head ? this.tail : -1;
    if (at < 0) return undefined;
    if (this.empty) this.head = at;
    this.empty = false;
    b.copy(this.buf, at);
    this.tail = at + n;
    return this.buf.subarray(at, at + n);
  }

  /** The spans before `oldest` (a span this ring returned, the oldest still kept) are free; none kept: all are. */
  free(oldest: Buffer | undefined): void {
    if (!oldest) {
      this.empty = true;
      this.head = this.tail = 0;
    } else if (oldest.buffer === this.buf.buffer) this.head = oldest.byteOffset - this.buf.byteOffset;
  }

  /** Whether a buffer for `live` kept bytes would be much smaller than this one. */
  oversized(live: number): boolean {
    return this.buf.length > RING_MIN_BYTES && live * 4 < this.buf.length;
  }

  /** A new buffer with room for `live` bytes and half as many again; every kept span (`spans`, oldest
   *  first, `live` bytes in all) is copied into it and its entry replaced by the new view. */
  resize(spans: Iterable<Buffer[]>, live: number): void {
    const old = this.buf;
    this.buf = Buffer.allocUnsafeSlow(Math.max(RING_MIN_BYTES, roundUp(live * 1.5)));
    this.empty = true;
    this.head = this.tail = 0;
    for (const list of spans)
      for (let i = 0; i < list.length; i++) if (list[i].buffer === old.buffer) list[i] = this.put(list[i])!;
  }
}
