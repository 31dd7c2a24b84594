// Incremental WAV (RIFF/WAVE) parser, hand-written: a dozen bytes of chunk headers; prism-media
// has no WAV reader and the data chunk of a live WAV may be unbounded (size 0 or 0xFFFFFFFF).
import { ByteQueue } from './byte-queue.js';
import { collectUnits, MalformedAudio, needBytes, type ContainerParser, type TrackInfo, type Unit } from './unit.js';

export class WavParser implements ContainerParser {
  info: TrackInfo | undefined;
  private q = new ByteQueue();
  private started = false;
  private dataLeft = 0; // bytes of the data chunk still to come (Infinity: to the end)
  private pad = 0;
  private inHeader = true;
  private bytesPerSecond = 0;
  private dataBytes = 0;
  private frameBytes = 1;
  gapBytes = 0;

  get bufferedBytes(): number {
    return this.q.length;
  }

  /** In the data chunk, as for raw PCM: the partial sample frame held is dropped, the next bytes
   * start a frame. In the headers nothing can be verified; bytes lost there fail the parse. */
  gap(): Unit[] {
    if (this.inHeader || this.dataLeft === 0 || this.q.length === 0) return [];
    this.gapBytes += this.q.length;
    this.q.take(this.q.length);
    return [];
  }

  push(chunk: Buffer): Unit[] {
    this.q.push(chunk);
    return collectUnits(() => this.step());
  }

  private step(): Unit | undefined {
    if (!this.started) {
      if (this.q.length < 12) return undefined;
      const h = this.q.peek(12);
      if (h.toString('latin1', 0, 4) !== 'RIFF' || h.toString('latin1', 8, 12) !== 'WAVE')
        throw new MalformedAudio('the stream does not start with a RIFF/WAVE header');
      this.started = true;
      return { bytes: this.q.take(12), header: true };
    }
    if (this.dataLeft > 0) {
      let n = Math.min(this.dataLeft, this.q.length);
      if (n < this.dataLeft) n -= n % this.frameBytes; // whole sample frames (the chunk's end aside)
      if (n === 0) return undefined;
      const bytes = this.q.take(n);
      this.dataLeft -= n;
      const start = this.dataBytes / this.bytesPerSecond;
      this.dataBytes += n;
      return { bytes, header: false, start, end: this.dataBytes / this.bytesPerSecond, payload: [bytes] };
    }
    if (this.pad > 0) {
      if (this.q.length < 1) return undefined;
      this.pad = 0;
      return { bytes: this.q.take(1), header: false };
    }
    if (this.q.length < 8) return undefined;
    const h = this.q.peek(8);
    const id = h.toString('latin1', 0, 4);
    const size = h.readUInt32LE(4);
    if (id === 'data') {
      if (!this.info) throw new MalformedAudio(`WAV data chunk at byte ${this.q.offset} comes before the fmt chunk`);
      this.inHeader = false;
      this.dataLeft = size === 0 || size === 0xffffffff ? Infinity : size;
      this.pad = size & 1 && Number.isFinite(this.dataLeft) ? 1 : 0;
      return { bytes: this.q.take(8), header: true };
    }
    const total = 8 + size + (size & 1);
    if (this.q.length < total) return undefined;
    const bytes = this.q.take(total);
    if (id === 'fmt ') this.fmt(bytes.subarray(8, 8 + size));
    return { bytes, header: this.inHeader };
  }

  private fmt(f: Buffer): void {
    needBytes(f, 16, 'WAV fmt chunk');
    let format = f.readUInt16LE(0);
    const channels = f.readUInt16LE(2),
      sampleRate = f.readUInt32LE(4),
      bits = f.readUInt16LE(14);
    if (format === 0xfffe && f.length >= 26) format = f.readUInt16LE(24); // WAVE_FORMAT_EXTENSIBLE sub-format
    const codec =
      format === 1 && bits === 16
        ? 'pcm-s16'
        : format === 3 && bits === 32
          ? 'pcm-f32'
          : `wav-format-${format}-${bits}bit`;
    if (channels < 1 || sampleRate < 1 || bits < 1)
      throw new MalformedAudio(`WAV fmt chunk gives ${channels} channels of ${bits}-bit samples at ${sampleRate} Hz`);
    this.info = { codec, channels, sampleRate };
    this.frameBytes = channels * Math.ceil(bits / 8);
    this.bytesPerSecond = sampleRate * channels * (bits / 8);
  }
}
