// The frames of one Opus packet (RFC 6716, section 3.2, "Frame Packing"): where each frame's bytes
// are, for the codes 0 to 3 of the TOC byte, padding and VBR lengths included. The TOC's durations
// come from the transcoder's table (opusPacketSamples48); nothing here copies bytes.
import { opusPacketSamples48 } from '../transcode/index.js';

/** RFC 6716 3.4 [R5]: at most 120 ms of frames, so at most 48 frames of 2.5 ms. */
export const MAX_OPUS_FRAMES = 48;

/** What the TOC byte says about a packet's frames (RFC 6716 3.1). */
export const enum OpusMode {
  Silk = 0,
  Hybrid = 1,
  Celt = 2,
}

export function opusMode(toc: number): OpusMode {
  const config = toc >> 3;
  return config < 12 ? OpusMode.Silk : config < 16 ? OpusMode.Hybrid : OpusMode.Celt;
}

/** The packet's frames, reused for every packet (no allocation per packet). */
export class OpusFrames {
  readonly offset = new Int32Array(MAX_OPUS_FRAMES);
  readonly length = new Int32Array(MAX_OPUS_FRAMES);
  count = 0;
  /** 48 kHz samples of each frame. */
  frameSamples = 0;

  /** Reads the packet's framing; false for a malformed packet (its frames are then unknown). */
  read(p: Uint8Array): boolean {
    this.count = 0;
    let samples: number;
    try {
      samples = opusPacketSamples48(p);
    } catch {
      return false;
    }
    const code = p[0] & 3;
    if (code === 0) return this.set(0, 1, p.length - 1) && this.done(1, samples);
    if (code === 1) {
      const half = (p.length - 1) / 2;
      return Number.isInteger(half) && this.set(0, 1, half) && this.set(1, 1 + half, half) && this.done(2, samples);
    }
    if (code === 2) {
      const n = frameLength(p, 1);
      if (n < 0) return false;
      const at = n < 252 ? 2 : 3;
      return this.set(0, at, n) && this.set(1, at + n, p.length - at - n) && this.done(2, samples);
    }
    return this.code3(p, samples);
  }

  private code3(p: Uint8Array, samples: number): boolean {
    const m = p[1] & 0x3f;
    if (m === 0) return false;
    let at = 2;
    let padding = 0;
    if (p[1] & 0x40) {
      // Padding length: each 255 means 254 bytes and another length byte (RFC 6716 3.2.5).
      let b: number;
      do {
        if (at >= p.length) return false;
        b = p[at++];
        padding += b === 255 ? 254 : b;
      } while (b === 255);
    }
    const end = p.length - padding;
    if (end < at) return false;
    if (p[1] & 0x80) {
      for (let i = 0; i < m - 1; i++) {
        const n = frameLength(p, at);
        if (n < 0) return false;
        at += n < 252 ? 1 : 2;
        this.offset[i] = n; // the lengths first; offsets once all are known
      }
      let off = at;
      for (let i = 0; i < m - 1; i++) {
        const n = this.offset[i];
        if (!this.set(i, off, n)) return false;
        off += n;
      }
      return off <= end && this.set(m - 1, off, end - off) && this.done(m, samples);
    }
    const each = (end - at) / m;
    if (!Number.isInteger(each)) return false;
    for (let i = 0; i < m; i++) this.set(i, at + i * each, each);
    return this.done(m, samples);
  }

  private set(i: number, offset: number, length: number): boolean {
    if (length < 0 || length > 1275) return false; // RFC 6716 3.4 [R2]
    this.offset[i] = offset;
    this.length[i] = length;
    return true;
  }

  private done(count: number, samples: number): boolean {
    this.count = count;
    this.frameSamples = samples / count;
    return true;
  }
}

/** A frame length of one or two bytes at p[at] (RFC 6716 3.2.1); -1 past the end. */
function frameLength(p: Uint8Array, at: number): number {
  if (at >= p.length) return -1;
  const b = p[at];
  if (b < 252) return b;
  if (at + 1 >= p.length) return -1;
  return b + 4 * p[at + 1];
}
