// Raw PCM: no container, nothing to parse; the declaration says what the bytes are.
import type { PcmDeclaration } from '../types.js';
import type { ContainerParser, TrackInfo, Unit } from './unit.js';

export class PcmParser implements ContainerParser {
  readonly info: TrackInfo;
  private bytesPerSecond: number;
  private total = 0;

  constructor(p: PcmDeclaration) {
    this.info = { codec: p.encoding === 'f32le' ? 'pcm-f32' : 'pcm-s16', sampleRate: p.sampleRate, channels: p.channels };
    this.bytesPerSecond = p.sampleRate * p.channels * (p.encoding === 'f32le' ? 4 : 2);
  }

  get bufferedBytes(): number { return 0; }

  push(chunk: Buffer): Unit[] {
    if (chunk.length === 0) return [];
    const start = this.total / this.bytesPerSecond;
    this.total += chunk.length;
    return [{ bytes: chunk, header: false, start, end: this.total / this.bytesPerSecond, payload: [chunk] }];
  }

}
