// Bytes received but not yet parsed, kept as a list of chunks so that feeding one byte at a time
// does not re-copy a large partial element on every push (parsers wait until `length` is enough).

export class ByteQueue {
  private chunks: Buffer[] = [];
  length = 0;
  /** Bytes taken so far: where the next byte sits in the stream (for error messages). */
  offset = 0;

  push(b: Buffer): void {
    if (b.length === 0) return;
    this.chunks.push(b);
    this.length += b.length;
  }

  /** The first n bytes (n ≤ length) as one contiguous buffer, without consuming them. */
  peek(n: number): Buffer {
    if (n > this.length) throw new RangeError('peek past the end');
    const head = this.chunks[0];
    if (head.length >= n) return head.subarray(0, n);
    // Join exactly n bytes: the rest of the last chunk stays where it is (a view), so a unit that
    // straddles two messages costs a copy of itself, not of the whole next message.
    let have = 0, i = 0;
    while (have + this.chunks[i].length < n) have += this.chunks[i++].length;
    const last = this.chunks[i], need = n - have;
    const parts = this.chunks.slice(0, i);
    parts.push(last.subarray(0, need));
    const joined = Buffer.concat(parts, n);
    if (need === last.length) this.chunks.splice(0, i + 1, joined);
    else this.chunks.splice(0, i + 1, joined, last.subarray(need));
    return joined;
  }

  /** Where `byte` next occurs at or after `from`, searched chunk by chunk (nothing joined); -1: not queued. */
  indexOf(byte: number, from: number): number {
    let base = 0;
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
    let base = 0, i = 0;
    while (i < this.chunks.length && at >= base + this.chunks[i].length) base += this.chunks[i++].length;
    const end = Math.min(this.length, at + n);
    if (i === this.chunks.length || end <= base + this.chunks[i].length) return (this.chunks[i] ?? Buffer.alloc(0)).subarray(at - base, end - base);
    const out = Buffer.allocUnsafe(end - at);
    for (let got = 0; got < out.length; i++, base += this.chunks[i - 1].length) {
      got += this.chunks[i].copy(out, got, Math.max(0, at - base));
    }
    return out;
  }

  /** Consumes the first n bytes. */
  take(n: number): Buffer {
    const out = this.peek(n);
    const head = this.chunks[0];
    if (head.length === n) this.chunks.shift();
    else this.chunks[0] = head.subarray(n);
    this.length -= n;
    this.offset += n;
    return out;
  }

  takeAll(): Buffer {
    return this.take(this.length);
  }
}
