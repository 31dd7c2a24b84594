// Incremental MP3 (MPEG audio) frame parser, hand-written: prism-media has no MP3 demuxer, and
// re-chunking needs frame boundaries; a frame's length and duration follow from its 4-byte header.
// Media time: samples per frame / sample rate, frame by frame (exact for CBR and VBR).
import { isMpegHeader } from '../sniff.js';
import { ByteQueue } from './byte-queue.js';
import { Resync, type Verdict } from './resync.js';
import { collectUnits, type ContainerParser, type TrackInfo, type Unit } from './unit.js';

const BITRATES: Record<string, number[]> = {
  '1-1': [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  '1-2': [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  '1-3': [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  '2-1': [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  '2-2': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const RATES: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };

export interface MpegFrame {
  length: number;
  samples: number;
  sampleRate: number;
  channels: number;
}

export function mpegFrame(h: Buffer): MpegFrame {
  const version = (h[1] >> 3) & 3; // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
  const layer = 4 - ((h[1] >> 1) & 3);
  const v1 = version === 3;
  const bitrate = BITRATES[v1 ? `1-${layer}` : layer === 1 ? '2-1' : '2-2'][h[2] >> 4] * 1000;
  const sampleRate = RATES[version][(h[2] >> 2) & 3];
  const pad = (h[2] >> 1) & 1;
  const channels = h[3] >> 6 === 3 ? 1 : 2;
  if (layer === 1)
    return { length: (Math.floor((12 * bitrate) / sampleRate) + pad) * 4, samples: 384, sampleRate, channels };
  const samples = layer === 3 && !v1 ? 576 : 1152;
  return { length: Math.floor(((samples / 8) * bitrate) / sampleRate) + pad, samples, sampleRate, channels };
}

export class Mp3Parser implements ContainerParser {
  info: TrackInfo | undefined;
  private q = new ByteQueue();
  private started = false;
  private time = 0;
  private resync = new Resync({ head: (b) => this.confirmedFrame(b, 0), at: (b, off) => this.confirmedFrame(b, off) });

  get bufferedBytes(): number {
    return this.q.length;
  }
  get gapBytes(): number {
    return this.resync.skipped;
  }

  gap(): Unit[] {
    this.resync.gap(this.q);
    return [];
  }

  push(chunk: Buffer): Unit[] {
    this.q.push(chunk);
    if (!this.resync.ready(this.q)) return [];
    return collectUnits(() => this.step());
  }

  /** A frame header at `off` (at the stream's sample rate) and another right after that frame. */
  private confirmedFrame(b: Buffer, off: number): Verdict {
    const header = (at: number): Verdict => {
      if (b.length - at < 4)
        return at >= b.length || (b[at] === 0xff && (at + 1 >= b.length || (b[at + 1] & 0xe0) === 0xe0))
          ? 'more'
          : 'no';
      return isMpegHeader(b, at) &&
        (!this.info || mpegFrame(b.subarray(at, at + 4)).sampleRate === this.info.sampleRate)
        ? 'yes'
        : 'no';
    };
    const first = header(off);
    if (first !== 'yes') return first;
    return header(off + mpegFrame(b.subarray(off, off + 4)).length);
  }

  private step(): Unit | undefined {
    if (!this.started) {
      if (this.q.length < 10) return undefined;
      this.started = true;
      const h = this.q.peek(10);
      if (h.toString('latin1', 0, 3) === 'ID3') {
        // ID3v2: syncsafe size, plus a footer when flagged.
        const size = ((h[6] & 0x7f) << 21) | ((h[7] & 0x7f) << 14) | ((h[8] & 0x7f) << 7) | (h[9] & 0x7f);
        this.skipTag = 10 + size + (h[5] & 0x10 ? 10 : 0);
      }
    }
    if (this.skipTag > 0) {
      if (this.q.length < this.skipTag) return undefined;
      const bytes = this.q.take(this.skipTag);
      this.skipTag = 0;
      return { bytes, header: true };
    }
    if (this.q.length < 4) return undefined;
    const h = this.q.peek(4);
    if (!isMpegHeader(h)) {
      // Junk between frames (or an ID3v1/APE tag at the end): pass it on up to the next sync byte.
      let i = this.q.indexOf(0xff, 1);
      if (i < 0) i = this.q.length;
      return { bytes: this.q.take(i), header: !this.info };
    }
    const f = mpegFrame(h);
    if (this.q.length < f.length) return undefined;
    const first = !this.info;
    if (first) this.info = { codec: 'mp3', sampleRate: f.sampleRate, channels: f.channels };
    const start = this.time;
    this.time += f.samples / f.sampleRate;
    return { bytes: this.q.take(f.length), header: first, start, end: this.time };
  }

  private skipTag = 0;
}
