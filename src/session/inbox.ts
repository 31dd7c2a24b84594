// Client audio as it arrives. uWS reuses a frame's buffer after its callback, so every frame is
// copied here, once: a piece of at least DIRECT_BYTES (a browser's 250 ms piece is a few KB) is
// delivered at once as its own exact copy; smaller frames are copied into one batch buffer rather
// than each into an object of its own, so a flood of one-byte frames costs a memcpy per frame, not a
// Buffer (and ~120 bytes of bookkeeping) per frame all the way down the pipeline. A batch goes on
// once per event-loop turn, or at once when full. A batch at least half full is given away as it is
// (no second copy, at most twice its size held); a smaller one is copied out exactly, so a client
// trickling tiny frames cannot make the session hold 16 KiB per byte. No batch buffer is kept past
// the turn its frames came in.

/** Frames at least this large skip the batch. */
const DIRECT_BYTES = 1024;
const BATCH_BYTES = 16 * 1024;

export class AudioInbox {
  private batch: Buffer | undefined;
  private length = 0;
  private scheduled = false;
  private readonly flushSoon = () => {
    this.scheduled = false;
    this.flush();
    this.batch = undefined;
  };

  /** `deliver` gets each piece or batch as a Buffer of its own (never a view into a reused buffer). */
  constructor(private readonly deliver: (audio: Buffer) => void) {}

  /** Bytes received and not yet delivered. */
  get bufferedBytes(): number {
    return this.length;
  }

  /** `frame` is only valid during the caller's callback: its bytes are copied now. */
  add(frame: ArrayBuffer): void {
    const n = frame.byteLength;
    if (n === 0) return;
    if (n >= DIRECT_BYTES) {
      this.flush();
      this.deliver(Buffer.from(frame.slice(0)));
      return;
    }
    if (this.length + n > BATCH_BYTES) this.flush();
    this.batch ??= Buffer.allocUnsafeSlow(BATCH_BYTES);
    this.batch.set(new Uint8Array(frame), this.length);
    this.length += n;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushSoon);
    }
  }

  /** Delivers what is batched now (before a text message, so order is kept). */
  flush(): void {
    if (this.length === 0 || !this.batch) return;
    const giveAway = this.length >= BATCH_BYTES / 2;
    const out = giveAway ? this.batch.subarray(0, this.length) : Buffer.from(this.batch.subarray(0, this.length));
    if (giveAway) this.batch = undefined;
    this.length = 0;
    this.deliver(out);
  }

  /** Drops what is batched (the session is over). */
  clear(): void {
    this.length = 0;
    this.batch = undefined;
  }
}
