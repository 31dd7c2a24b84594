// Client audio as it arrives. uWS reuses a frame's buffer after its callback, so every frame is
// copied here, once, into memory of its own that holds its bytes and a little room in front for the
// parser's leftover of the piece before (pieceCopy; never Node's shared 8 KiB pool, which a kept piece
// would pin whole): a piece of at least DIRECT_BYTES (a browser's 250 ms piece is a few
// KB) is delivered at once as its own copy; a smaller one (a 250 ms piece of 20 ms Opus
// packets at 32 kb/s is about 1 KB) is copied so too and waits for the end of the event-loop
// turn, and only a second small frame in that turn starts a batch buffer that the turn's frames are
// copied into, so a flood of one-byte frames costs a memcpy per frame, not a Buffer (and ~120 bytes
// of bookkeeping) per frame all the way down the pipeline. A batch goes on once per turn, or at once
// when full. A batch at least half full is given away as it is (no second copy, at most twice its
// size held); a smaller one is copied out exactly, so a client trickling tiny frames cannot make the
// session hold 16 KiB per byte. No batch buffer is kept past the turn its frames came in.
import { pieceCopy } from '../audio/index.js';

/** Frames at least this large skip the batch. */
const DIRECT_BYTES = 1024;
const BATCH_BYTES = 16 * 1024;

/** The bytes of `b` in an ArrayBuffer of their own. */
const exactCopy = (b: Uint8Array): Buffer => Buffer.from(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));

export class AudioInbox {
  /** the turn's one small frame, while it is the only one */
  private single: Buffer | undefined;
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
      this.deliver(pieceCopy(new Uint8Array(frame)));
      return;
    }
    if (this.length + n > BATCH_BYTES) this.flush();
    if (this.length === 0) this.single = pieceCopy(new Uint8Array(frame));
    else this.append(new Uint8Array(frame));
    this.length += n;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.flushSoon);
    }
  }

  /** Delivers what is batched now (before a text message, so order is kept). */
  flush(): void {
    if (this.length === 0) return;
    const single = this.single,
      batch = this.batch!;
    const giveAway = !single && this.length >= BATCH_BYTES / 2;
    const out = single ?? (giveAway ? batch.subarray(0, this.length) : exactCopy(batch.subarray(0, this.length)));
    if (giveAway) this.batch = undefined;
    this.single = undefined;
    this.length = 0;
    this.deliver(out);
  }

  /** Drops what is batched (the session is over). */
  clear(): void {
    this.length = 0;
    this.single = undefined;
    this.batch = undefined;
  }

  /** A small frame after others in this turn: into the batch buffer, behind them. */
  private append(bytes: Uint8Array): void {
    this.batch ??= Buffer.allocUnsafeSlow(BATCH_BYTES);
    if (this.single) this.batch.set(this.single); // it is the turn's first `length` bytes
    this.single = undefined;
    this.batch.set(bytes, this.length);
  }
}
