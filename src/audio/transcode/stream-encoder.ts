// One stream's PCM → Opus packets: framing, sample conversion, resampling, encoding. Synchronous
// after create(), so it runs the same inline or inside a worker thread (encoder-worker.ts).
import opusPkg from '@discordjs/opus';
import { assertPcmFormat, encoderRate, PcmFramer, type PcmFormat, floatToInt16 } from './pcm-format.js';
import { createResampler, type Resampler } from './resampler.js';
import { LIBOPUS_PRE_SKIP } from './opus-headers.js';

const { OpusEncoder } = opusPkg;
type Encoder = InstanceType<typeof OpusEncoder>;

const OPUS_SET_SIGNAL_REQUEST = 4024;
const OPUS_SIGNAL_VOICE = 3001;

export interface EncoderOptions {
  bitrate?: number;
  frameMs?: 20 | 40 | 60;
}

export interface EncodeResult {
  packets: Buffer[];
  /** Seconds this call spent converting and encoding. */
  seconds: number;
}

export interface EndResult extends EncodeResult {
  /** Final granule (48 kHz, pre-skip included): trims the padding so decoded = input duration. */
  endGranule: number;
}

export function defaultBitrate(channels: number): number {
  return channels === 2 ? 32000 : 24000;
}

export class StreamEncoder {
  private readonly framer: PcmFramer;
  private readonly encoder: Encoder;
  private readonly frame: Int16Array;
  private fill = 0;
  private samplesEncoded = 0; // per channel, at the encoder rate
  private ended = false;

  private constructor(
    private readonly format: PcmFormat,
    readonly rate: number,
    private readonly frameSize: number,
    bitrate: number,
    private readonly resampler: Resampler | undefined,
  ) {
    this.framer = new PcmFramer(format);
    this.encoder = new OpusEncoder(rate, format.channels);
    this.encoder.setBitrate(bitrate);
    this.encoder.applyEncoderCTL(OPUS_SET_SIGNAL_REQUEST, OPUS_SIGNAL_VOICE);
    this.frame = new Int16Array(frameSize * format.channels);
  }

  static async create(format: PcmFormat, o: EncoderOptions = {}): Promise<StreamEncoder> {
    assertPcmFormat(format);
    const frameMs = o.frameMs ?? 20;
    if (![20, 40, 60].includes(frameMs)) throw new RangeError(`frameMs must be 20, 40 or 60, got ${frameMs}`);
    const rate = encoderRate(format.sampleRate);
    const resampler = rate === format.sampleRate ? undefined : await createResampler(format.channels, format.sampleRate, rate);
    const bitrate = o.bitrate ?? defaultBitrate(format.channels);
    return new StreamEncoder(format, rate, (rate * frameMs) / 1000, bitrate, resampler);
  }

  push(pcm: Uint8Array): EncodeResult {
    if (this.ended) throw new Error('StreamEncoder: push after end');
    const t0 = performance.now();
    const bytes = this.framer.take(pcm);
    const packets: Buffer[] = [];
    if (bytes.length > 0) {
      if (this.resampler) this.addFloat(this.resampler.push(this.framer.toFloat32(bytes)), packets);
      else this.addInt16(this.framer.toInt16(bytes), packets);
    }
    return { packets, seconds: (performance.now() - t0) / 1000 };
  }

  end(): EndResult {
    if (this.ended) throw new Error('StreamEncoder: end twice');
    this.ended = true;
    const t0 = performance.now();
    const packets: Buffer[] = [];
    if (this.resampler) {
      this.addFloat(this.resampler.flush(), packets);
      this.resampler.destroy();
    }
    const endGranule = LIBOPUS_PRE_SKIP + Math.round((this.framer.frames * 48000) / this.format.sampleRate);
    // Encode silence until the decoder (delayed by the lookahead) has given back every input sample.
    const needed = Math.ceil((endGranule * this.rate) / 48000);
    const ch = this.format.channels;
    while (this.samplesEncoded + this.fill / ch < needed || this.fill > 0) {
      this.frame.fill(0, this.fill);
      this.fill = this.frame.length;
      this.encodeFrame(packets);
    }
    return { packets, endGranule, seconds: (performance.now() - t0) / 1000 };
  }

  /** Releases the resampler without encoding a tail (abandoned streams). */
  destroy(): void {
    if (!this.ended) this.resampler?.destroy();
    this.ended = true;
  }

  private addFloat(samples: Float32Array, packets: Buffer[]): void {
    const s = new Int16Array(samples.length);
    for (let i = 0; i < samples.length; i++) s[i] = floatToInt16(samples[i]);
    this.addInt16(s, packets);
  }

  private addInt16(samples: Int16Array, packets: Buffer[]): void {
    let off = 0;
    while (off < samples.length) {
      const n = Math.min(this.frame.length - this.fill, samples.length - off);
      this.frame.set(samples.subarray(off, off + n), this.fill);
      this.fill += n;
      off += n;
      if (this.fill === this.frame.length) this.encodeFrame(packets);
    }
  }

  private encodeFrame(packets: Buffer[]): void {
    // The binding reads the buffer synchronously and returns a copy of the packet.
    packets.push(this.encoder.encode(Buffer.from(this.frame.buffer, this.frame.byteOffset, this.frame.byteLength)));
    this.samplesEncoded += this.frameSize;
    this.fill = 0;
  }
}
