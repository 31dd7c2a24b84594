// Raw PCM description and decoding of arbitrary byte chunks into whole samples. The sample
// conversions (s16be/f32le → s16, clamping) are a few lines, not worth a dependency.

export interface PcmFormat {
  sampleRate: number;
  channels: number;
  encoding: 's16le' | 's16be' | 'f32le';
}

/** Rates libopus encodes directly. */
export const OPUS_RATES = [8000, 12000, 16000, 24000, 48000] as const;

export function bytesPerSample(f: PcmFormat): number {
  return f.encoding === 'f32le' ? 4 : 2;
}

/**
 * Throws a RangeError for formats we cannot encode. More than two channels is rejected, not
 * downmixed: the ambient socket maps channels to participants, so a silent downmix would lose
 * who spoke, and mapping family 0 (what @discordjs/opus can write) carries at most two.
 */
export function assertPcmFormat(f: PcmFormat): void {
  if (!Number.isInteger(f.sampleRate) || f.sampleRate < 1000 || f.sampleRate > 384000) {
    throw new RangeError(`unsupported PCM sample rate ${f.sampleRate}`);
  }
  if (f.channels !== 1 && f.channels !== 2)
    throw new RangeError(`PCM with ${f.channels} channels: only 1 or 2 are supported`);
  if (!['s16le', 's16be', 'f32le'].includes(f.encoding))
    throw new RangeError(`unsupported PCM encoding ${String(f.encoding)}`);
}

/** The rate the encoder runs at: the input's own if Opus takes it, else 16 kHz (≤ 16 kHz input) or 48 kHz. */
export function encoderRate(inputRate: number): number {
  if ((OPUS_RATES as readonly number[]).includes(inputRate)) return inputRate;
  return inputRate <= 16000 ? 16000 : 48000;
}

/** Splits a byte stream into whole sample frames, carrying partial ones over to the next chunk. */
export class PcmFramer {
  private carry: Buffer = Buffer.alloc(0);
  private readonly frameBytes: number;
  /** Whole sample frames (one sample per channel) taken so far. */
  frames = 0;

  constructor(private readonly format: PcmFormat) {
    this.frameBytes = bytesPerSample(format) * format.channels;
  }

  /** Whole frames of `chunk` (after what was carried), as bytes. */
  take(chunk: Uint8Array): Buffer {
    const all = this.carry.length
      ? Buffer.concat([this.carry, chunk])
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const whole = all.length - (all.length % this.frameBytes);
    this.carry = Buffer.from(all.subarray(whole)); // copy: the caller may reuse its buffer
    this.frames += whole / this.frameBytes;
    return all.subarray(0, whole);
  }

  /** Interleaved samples of whole-frame s16be or f32le bytes as s16 (s16le needs no conversion). */
  toInt16(bytes: Buffer): Int16Array {
    const n = bytes.length / bytesPerSample(this.format);
    const out = new Int16Array(n);
    if (this.format.encoding === 's16be') for (let i = 0; i < n; i++) out[i] = bytes.readInt16BE(i * 2);
    else for (let i = 0; i < n; i++) out[i] = floatToInt16(bytes.readFloatLE(i * 4));
    return out;
  }

  /** Interleaved samples of whole-frame bytes as float in [-1, 1] (resampler input). */
  toFloat32(bytes: Buffer): Float32Array {
    const n = bytes.length / bytesPerSample(this.format);
    const out = new Float32Array(n);
    switch (this.format.encoding) {
      case 's16le':
        for (let i = 0; i < n; i++) out[i] = bytes.readInt16LE(i * 2) / 32768;
        break;
      case 's16be':
        for (let i = 0; i < n; i++) out[i] = bytes.readInt16BE(i * 2) / 32768;
        break;
      case 'f32le':
        for (let i = 0; i < n; i++) {
          const v = bytes.readFloatLE(i * 4);
          out[i] = v > 1 ? 1 : v < -1 ? -1 : v || 0; // clamp; NaN → 0
        }
        break;
    }
    return out;
  }
}

export function floatToInt16(v: number): number {
  const s = Math.round(v * 32767);
  return s > 32767 ? 32767 : s < -32768 ? -32768 : s || 0;
}
