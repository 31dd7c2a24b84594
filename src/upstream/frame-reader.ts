// Reads a WebSocket server's frames from bytes as they arrive, however they are split:
// whole messages (fragments put together), pings and the close frame go to its sink, and the first
// breach of the protocol ends the reading, with the close code the server is to be sent. It knows
// nothing of sockets, so it is tested with bytes alone.
import { isUtf8 } from 'node:buffer';

export const OP_CONT = 0,
  OP_TEXT = 1,
  OP_BINARY = 2,
  OP_CLOSE = 8,
  OP_PING = 9,
  OP_PONG = 10;

/** Pieces of one fragmented message, each kept until the last (4 MiB in 1 KiB pieces): real servers send a few. */
export const MAX_FRAGMENTS = 4096;

/** What the reader finds. Payloads it hands on may be kept: none is a view of a reused read buffer. */
export interface FrameSink {
  /** A whole message; text is valid UTF-8. */
  message(data: Buffer, binary: boolean): void;
  ping(payload: Buffer): void;
  /** The server's close frame (code 1005: it had none). Nothing after it is read. */
  close(code: number, reason: string): void;
  /** The server broke the protocol; `code` is the close code to answer with. Nothing after it is read. */
  error(code: number, message: string): void;
}

export interface FrameReaderOptions {
  /** a message (all its fragments) over this is refused with 1009 */
  maxMessageBytes: number;
  /** The buffer the caller reads into and reuses for the next read: what outlives a push is copied out of it. */
  readBuffer?: Buffer;
}

/** Close codes a peer may send: the protocol's own (not those that only report a state) and 3000-4999. */
const validCloseCode = (c: number) =>
  (c >= 1000 && c <= 1014 && c !== 1004 && c !== 1005 && c !== 1006) || (c >= 3000 && c <= 4999);

/** What is wrong with a frame's first two bytes, given the opcode of the fragmented message under way (0: none). */
function breach(b0: number, b1: number, len: number, fragOp: number): string | undefined {
  const opcode = b0 & 0x0f;
  if ((b1 & 0x80) !== 0) return 'a masked frame';
  if ((b0 & 0x70) !== 0) return 'RSV bits set';
  if (opcode >= 8) {
    if (opcode > OP_PONG) return `opcode ${opcode}`;
    if ((b0 & 0x80) === 0) return 'a fragmented control frame';
    return len > 125 ? 'a control frame over 125 bytes' : undefined;
  }
  if (opcode > OP_BINARY) return `opcode ${opcode}`;
  if (opcode === OP_CONT) return fragOp === 0 ? 'a continuation of nothing' : undefined;
  return fragOp !== 0 ? 'a new message inside a fragmented one' : undefined;
}

export class FrameReader {
  /** Received bytes not yet a whole frame; #need: how many the frame at their start takes. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #need = 0;
  /** A fragmented message: its opcode and pieces so far. */
  #fragOp = 0;
  #frags: Buffer[] = [];
  #fragBytes = 0;
  /** after a close frame or an error */
  #done = false;

  constructor(
    private readonly sink: FrameSink,
    private readonly o: FrameReaderOptions,
  ) {}

  push(chunk: Buffer): void {
    if (this.#done) return;
    if (this.#pendingBytes > 0) {
      this.#pending.push(this.#own(chunk));
      this.#pendingBytes += chunk.length;
      if (this.#pendingBytes < this.#need) return;
      chunk = Buffer.concat(this.#pending, this.#pendingBytes);
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    let off = 0;
    while (off < chunk.length && !this.#done) {
      const used = this.#frame(chunk, off);
      if (used === 0) break;
      off += used;
    }
    if (off < chunk.length && !this.#done) {
      this.#pending.push(this.#own(off === 0 ? chunk : chunk.subarray(off)));
      this.#pendingBytes = chunk.length - off;
    }
  }

  /** Bytes in `b` from the caller's read buffer are copied: that buffer is overwritten by the next read. */
  #own(b: Buffer): Buffer {
    return b.buffer === this.o.readBuffer?.buffer ? Buffer.from(b) : b;
  }

  /** One frame at `off`: its length, or 0 when it is not all here yet (or reading ended). */
  #frame(b: Buffer, off: number): number {
    const avail = b.length - off;
    if (avail < 2) return this.#more(2);
    const b0 = b[off],
      b1 = b[off + 1];
    const opcode = b0 & 0x0f;
    const fin = (b0 & 0x80) !== 0;
    let len = b1 & 0x7f;
    let head = 2;
    if (len === 126) {
      if (avail < 4) return this.#more(4);
      len = b.readUInt16BE(off + 2);
      head = 4;
    } else if (len === 127) {
      if (avail < 10) return this.#more(10);
      len = b.readUInt32BE(off + 2) * 2 ** 32 + b.readUInt32BE(off + 6);
      head = 10;
    }
    const bad = breach(b0, b1, len, this.#fragOp);
    if (bad) return this.#fail(1002, `Invalid WebSocket frame: ${bad}`);
    // Refused on its header: a frame over the bound is never waited for.
    if (opcode < 8 && this.#fragBytes + len > this.o.maxMessageBytes)
      return this.#fail(1009, 'Max payload size exceeded');
    if (avail < head + len) return this.#more(head + len);
    const payload = b.subarray(off + head, off + head + len);
    if (opcode >= 8) this.#control(opcode, payload);
    else if (fin && opcode !== OP_CONT) this.#message(payload, opcode === OP_BINARY);
    else this.#fragment(opcode, payload, fin);
    return this.#done ? 0 : head + len;
  }

  /** The frame at the start of what is pending needs `bytes` in all; 0 stops the loop. */
  #more(bytes: number): number {
    this.#need = bytes;
    return 0;
  }

  #fragment(opcode: number, payload: Buffer, fin: boolean): void {
    if (opcode !== OP_CONT) this.#fragOp = opcode;
    if (this.#frags.length === MAX_FRAGMENTS)
      return void this.#fail(1009, `a message in over ${MAX_FRAGMENTS} fragments`);
    if (payload.length > 0) this.#frags.push(this.#own(payload));
    this.#fragBytes += payload.length;
    if (!fin) return;
    const message = Buffer.concat(this.#frags, this.#fragBytes);
    const binary = this.#fragOp === OP_BINARY;
    this.#fragOp = 0;
    this.#frags = [];
    this.#fragBytes = 0;
    this.#message(message, binary);
  }

  #message(data: Buffer, binary: boolean): void {
    if (!binary && !isUtf8(data)) return void this.#fail(1007, 'Invalid WebSocket frame: invalid UTF-8 sequence');
    this.sink.message(this.#own(data), binary);
  }

  #control(opcode: number, payload: Buffer): void {
    if (opcode === OP_PING) return this.sink.ping(this.#own(payload));
    if (opcode !== OP_CLOSE) return; // a pong: the bytes' arrival was all it had to say
    if (payload.length === 1) return void this.#fail(1002, 'Invalid WebSocket frame: a close frame of 1 byte');
    let code = 1005,
      reason = '';
    if (payload.length >= 2) {
      code = payload.readUInt16BE(0);
      if (!validCloseCode(code)) return void this.#fail(1002, `Invalid WebSocket frame: close code ${code}`);
      const text = payload.subarray(2);
      if (!isUtf8(text)) return void this.#fail(1007, 'Invalid WebSocket frame: invalid UTF-8 sequence');
      reason = text.toString();
    }
    this.#done = true;
    this.sink.close(code, reason);
  }

  #fail(code: number, message: string): number {
    this.#done = true;
    this.sink.error(code, message);
    return 0;
  }
}
