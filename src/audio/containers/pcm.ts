// Raw PCM: no container, nothing to parse; the declaration says what the bytes are. Units carry
// whole sample frames (a partial one waits for its rest), so a gap can keep the stream aligned.
import type { ContainerParser, TrackInfo, Unit } from './unit.js';

/** What a config declares of raw PCM (its audioFormat's parameters). */
export interface PcmDeclaration {
  sampleRate: number;
  channels: number;
  encoding: 's16le' | 's16be' | 'f32le';
}

export class PcmParser implements ContainerParser {
  readonly info: TrackInfo;
  gapBytes = 0;
  private bytesPerSecond: number;
  private frameBytes: number;
  private total = 0;
  private partial = Buffer.alloc(0);

  constructor(p: PcmDeclaration) {
    this.info = {
      codec: p.encoding === 'f32le' ? 'pcm-f32' : 'pcm-s16',
      sampleRate: p.sampleRate,
      channels: p.channels,
    };
    this.frameBytes = p.channels * (p.encoding === 'f32le' ? 4 : 2);
    this.bytesPerSecond = p.sampleRate * this.frameBytes;
  }

  get bufferedBytes(): number {
    return this.partial.length;
  }

  /** Raw samples carry no boundary to verify: a client sends whole sample frames in each message,
   * so after a lost message the next starts on a frame; only a partial frame held is dropped. */
  gap(): Unit[] {
    this.gapBytes += this.partial.length;
    this.partial = Buffer.alloc(0);
    return [];
  }

  push(chunk: Buffer): Unit[] {
    const all = this.partial.length ? Buffer.concat([this.partial, chunk]) : chunk;
    const whole = all.length - (all.length % this.frameBytes);
    this.partial = Buffer.from(all.subarray(whole)); // a copy: the caller's chunk may be reused
    if (whole === 0) return [];
    const bytes = all.subarray(0, whole);
    const start = this.total / this.bytesPerSecond;
    this.total += whole;
    return [{ bytes, header: false, start, end: this.total / this.bytesPerSecond, payload: [bytes] }];
  }
}
