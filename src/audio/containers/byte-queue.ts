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
    if (this.chunks[0].length < n) {
      let have = 0, i = 0;
      while (have < n) have += this.chunks[i++].length;
      this.chunks.splice(0, i, Buffer.concat(this.chunks.slice(0, i), have));
    }
    return this.chunks[0].subarray(0, n);
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
