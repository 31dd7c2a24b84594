// Incremental FLAC parser, hand-written: nothing on npm parses FLAC frames incrementally, and
// re-chunking needs frame boundaries. A frame has no length field: it ends where the next valid
// frame header (sync code + header CRC-8) begins. Media time: each header's block size.
import { ByteQueue } from './byte-queue.js';
import { Resync, type Verdict } from './resync.js';
import { collectUnits, MalformedAudio, needBytes, type ContainerParser, type TrackInfo, type Unit } from './unit.js';

const CRC8 = (() => {
  const t = new Uint8Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let b = 0; b < 8; b++) c = c & 0x80 ? ((c << 1) ^ 0x07) & 0xff : (c << 1) & 0xff;
    t[i] = c;
  }
  return t;
})();

/** Block size of the frame whose header starts at `off`, or 0 when no valid header is there. */
function frameHeader(b: Buffer, off: number): number {
  if (off + 6 > b.length || b[off] !== 0xff || (b[off + 1] & 0xfe) !== 0xf8) return 0;
  const bsCode = b[off + 2] >> 4,
    srCode = b[off + 2] & 15;
  if (bsCode === 0 || srCode === 15 || b[off + 3] >> 4 >= 11 || b[off + 3] & 1) return 0;
  let p = off + 4;
  const lead = b[p];
  let n = 0;
  while (n < 8 && lead & (0x80 >> n)) n++;
  if (n === 1 || n > 7) return 0;
  p += n === 0 ? 1 : n;
  let bs = bsCode === 1 ? 192 : bsCode <= 5 ? 576 << (bsCode - 2) : bsCode >= 8 ? 256 << (bsCode - 8) : 0;
  if (bsCode === 6) {
    if (p + 1 > b.length) return 0;
    bs = b[p] + 1;
    p += 1;
  }
  if (bsCode === 7) {
    if (p + 2 > b.length) return 0;
    bs = b.readUInt16BE(p) + 1;
    p += 2;
  }
  if (srCode === 12) p += 1;
  else if (srCode === 13 || srCode === 14) p += 2;
  if (p + 1 > b.length) return 0;
  let crc = 0;
  for (let i = off; i < p; i++) crc = CRC8[crc ^ b[i]];
  return crc === b[p] ? bs : 0;
}

/** Where the next frame header in `b` starts, from `from`; -1: none (yet). */
function nextFrameHeader(b: Buffer, from: number): number {
  for (let i = b.indexOf(0xff, from); i >= 0 && i + 1 < b.length; i = b.indexOf(0xff, i + 1))
    if (frameHeader(b, i)) return i;
  return -1;
}

const CRC16 = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let b = 0; b < 8; b++) c = c & 0x8000 ? ((c << 1) ^ 0x8005) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/** A frame at `off` whose CRC-16 (over the frame, up to a next frame header) checks, within
 * `bound` bytes. A sync code with a valid header CRC-8 can occur inside a frame by chance: each one
 * is tried as its end. */
function verifiedFrame(b: Buffer, off: number, bound: number): Verdict {
  if (b.length - off < 16)
    return b[off] === 0xff && (off + 1 >= b.length || (b[off + 1] & 0xfe) === 0xf8) ? 'more' : 'no';
  if (!frameHeader(b, off)) return 'no';
  let crc = 0,
    at = off;
  const end = Math.min(b.length, off + bound + 16);
  for (
    let next = nextFrameHeader(b.subarray(0, end), off + 2);
    next >= 0;
    next = nextFrameHeader(b.subarray(0, end), next + 1)
  ) {
    for (; at < next - 2; at++) crc = ((crc << 8) & 0xffff) ^ CRC16[(crc >> 8) ^ b[at]];
    if (crc === b.readUInt16BE(next - 2)) return 'yes';
  }
  return b.length < off + bound + 16 ? 'more' : 'no';
}

/** The largest frame FLAC can code (65535 samples × 8 channels × 33 bits, verbatim) and its headers. */
const MAX_FRAME_BYTES = Math.ceil((65535 * 8 * 33) / 8) + 1024;

export class FlacParser implements ContainerParser {
  info: TrackInfo | undefined;
  private q = new ByteQueue();
  private need = 4;
  private started = false;
  private lastBlock = false;
  private samples = 0;
  private scanFrom = 0; // the queue up to here holds no frame header (a header may straddle the end)

  /** The largest frame this stream can have (STREAMINFO's, or its largest block stored verbatim). */
  private frameBound = MAX_FRAME_BYTES;
  private resync = new Resync({
    head: (b) => verifiedFrame(b, 0, this.frameBound),
    at: (b, off) => verifiedFrame(b, off, this.frameBound),
  });

  get bufferedBytes(): number {
    return this.q.length;
  }
  get gapBytes(): number {
    return this.resync.skipped;
  }

  /** In the metadata blocks nothing can be verified; bytes lost there fail the parse. The queue
   * may hold whole frames (the search for the next header waits as it grows): they go first, so
   * the check after the gap is of the one frame the gap may have cut. */
  gap(): Unit[] {
    if (!this.lastBlock) return [];
    this.need = 4;
    this.scanFrom = 0;
    const whole = collectUnits(() => (this.q.length >= this.need ? this.step(false) : undefined));
    this.resync.gap(this.q);
    this.need = 4;
    this.scanFrom = 0;
    return whole;
  }

  push(chunk: Buffer): Unit[] {
    this.q.push(chunk);
    if (!this.resync.ready(this.q)) return [];
    return collectUnits(() => (this.q.length >= this.need ? this.step(false) : undefined));
  }

  pause(): Unit[] {
    const out = this.push(Buffer.alloc(0));
    // The queue may hold more than one frame (the search for the next header waits for more bytes
    // as the queue grows): each goes out, the last up to the queue's end.
    const atFrame = () =>
      this.lastBlock && this.q.length >= 16 && frameHeader(this.q.peek(16), 0) && this.resync.ready(this.q);
    out.push(...collectUnits(() => (atFrame() ? this.step(true) : undefined)));
    return out;
  }

  private step(atEnd: boolean): Unit | undefined {
    this.need = 4;
    if (!this.started) {
      if (this.q.peek(4).toString('latin1') !== 'fLaC')
        throw new MalformedAudio('the FLAC stream does not start with fLaC');
      this.started = true;
      return { bytes: this.q.take(4), header: true };
    }
    if (!this.lastBlock) {
      const h = this.q.peek(4);
      const len = 4 + ((h[1] << 16) | (h[2] << 8) | h[3]);
      if (this.q.length < len) {
        this.need = len;
        return undefined;
      }
      const bytes = this.q.take(len);
      if ((h[0] & 0x7f) === 0) this.streamInfo(bytes.subarray(4));
      if (h[0] & 0x80) {
        this.lastBlock = true;
        if (!this.info)
          throw new MalformedAudio(`FLAC metadata ends at byte ${this.q.offset} without a STREAMINFO block`);
      }
      return { bytes, header: true };
    }
    const held = this.q.length;
    const bs = frameHeader(this.q.window(0, 16), 0);
    if (!bs && held < 16 && !atEnd) {
      this.need = 16;
      return undefined;
    }
    const next = this.queuedFrameHeader(Math.max(bs ? 2 : 1, this.scanFrom));
    if (next < 0 && !atEnd) {
      if (held > MAX_FRAME_BYTES)
        throw new MalformedAudio(`no FLAC frame header in the ${held} bytes from byte ${this.q.offset}`);
      // Search on once more has come; what was searched is not searched again, and the wait grows
      // with the bytes held, so a long frame (or junk) costs linear time, not quadratic.
      this.scanFrom = Math.max(0, held - 16);
      this.need = held + Math.max(512, held >> 2);
      return undefined;
    }
    this.scanFrom = 0;
    const bytes = this.q.take(next < 0 ? held : next);
    // Not at a frame header (a tag, or the rest of a frame sent on after a pause): the bytes up to
    // the next frame header are passed on as they are.
    if (!bs) return { bytes, header: false };
    const start = this.samples / (this.info?.sampleRate ?? 1);
    this.samples += bs;
    return { bytes, header: false, start, end: this.samples / (this.info?.sampleRate ?? 1) };
  }

  /** Where the next frame header in the queue starts (as nextFrameHeader), searched in place: the
   * queue is not joined into one buffer for it. */
  private queuedFrameHeader(from: number): number {
    for (let i = this.q.indexOf(0xff, from); i >= 0 && i + 1 < this.q.length; i = this.q.indexOf(0xff, i + 1)) {
      if (frameHeader(this.q.window(i, 16), 0)) return i;
    }
    return -1;
  }

  private streamInfo(b: Buffer): void {
    needBytes(b, 18, 'FLAC STREAMINFO');
    const sampleRate = (b[10] << 12) | (b[11] << 4) | (b[12] >> 4);
    if (sampleRate === 0) throw new MalformedAudio('FLAC STREAMINFO gives a sample rate of 0');
    const channels = ((b[12] >> 1) & 7) + 1,
      bits = (((b[12] & 1) << 4) | (b[13] >> 4)) + 1;
    this.info = { codec: 'flac', sampleRate, channels };
    const verbatim = Math.ceil((b.readUInt16BE(2) * channels * (bits + 1)) / 8) + 1024; // +1 bit: a side channel
    this.frameBound = Math.min(MAX_FRAME_BYTES, b.readUIntBE(7, 3) || verbatim);
  }
}
