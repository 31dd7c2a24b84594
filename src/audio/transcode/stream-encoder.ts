// One stream's PCM → Opus packets: sample conversion, resampling, framing, encoding. Synchronous
// after create(), so it runs the same inline or inside a worker thread (encoder-worker.ts).
//
// Settings, chosen with bench/transcode on the 16 kHz dictation fixture at 24 kb/s (log-mel distance
// of the decoded audio to the input, lower is closer; real-time streams per core of the bare
// encoder): CELT only (OPUS_APPLICATION_RESTRICTED_LOWDELAY) at complexity 0 measured 4.3 dB, SNR
// 13 dB, ~1,000 streams/core; SILK (VOIP) at complexity 0: 5.4 dB, SNR 11 dB, ~350/core; the
// libopus default (complexity 9, SILK): 2.7 dB, ~70/core; 12 kb/s or a narrowband cap: 16-18 dB.
// CELT complexity 0 also skips spreading (SPREAD_NONE), which kept harmonics closer than 1-4 did.
import { createRequire } from 'node:module';
import { assertPcmFormat, encoderRate, PcmFramer, type PcmFormat, floatToInt16 } from './pcm-format.js';
import { createResampler, type Resampler } from './resampler.js';

// The addon is required by the first encoder, not at start: a gateway that never transcodes
// never loads it (idle memory).
const require = createRequire(import.meta.url);
type Opus = typeof import('@discordjs/opus');
type Encoder = InstanceType<Opus['OpusEncoder']>;

const OPUS_SET_APPLICATION_REQUEST = 4000;
const OPUS_APPLICATION_RESTRICTED_LOWDELAY = 2051;
const OPUS_SET_COMPLEXITY_REQUEST = 4010;

/** What the encoder runs with; bench/transcode gives ffmpeg the same. */
export const ENCODER_SETTINGS = { application: 'restricted-lowdelay', complexity: 0, frameMs: 20 } as const;

/** CELT-only lookahead is Fs/400 (2.5 ms, no SILK delay compensation): 120 samples at 48 kHz. */
export const ENCODER_PRE_SKIP = 120;

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
  private readonly encoder: Encoder;
  /** One Opus frame of s16le bytes being filled. */
  private readonly frame: Buffer;
  private fill = 0;
  private samplesEncoded = 0; // per channel, at the encoder rate
  private s16leBytes = 0; // input bytes taken as they are (s16le at an Opus rate)
  private ended = false;

  private constructor(
    private readonly format: PcmFormat,
    readonly rate: number,
    private readonly frameSize: number,
    bitrate: number,
    private readonly resampler: Resampler | undefined,
    /** Sample conversion for anything but s16le at an Opus rate (which is framed as bytes). */
    private readonly framer: PcmFramer | undefined,
  ) {
    this.encoder = new (require('@discordjs/opus') as Opus).OpusEncoder(rate, format.channels);
    this.encoder.applyEncoderCTL(OPUS_SET_APPLICATION_REQUEST, OPUS_APPLICATION_RESTRICTED_LOWDELAY);
    this.encoder.applyEncoderCTL(OPUS_SET_COMPLEXITY_REQUEST, ENCODER_SETTINGS.complexity);
    this.encoder.setBitrate(bitrate);
    this.frame = Buffer.alloc(frameSize * format.channels * 2);
  }

  static async create(format: PcmFormat, o: EncoderOptions = {}): Promise<StreamEncoder> {
    assertPcmFormat(format);
    const frameMs = o.frameMs ?? ENCODER_SETTINGS.frameMs;
    if (![20, 40, 60].includes(frameMs)) throw new RangeError(`frameMs must be 20, 40 or 60, got ${frameMs}`);
    const rate = encoderRate(format.sampleRate);
    const resampler =
      rate === format.sampleRate ? undefined : await createResampler(format.channels, format.sampleRate, rate);
    const framer = resampler || format.encoding !== 's16le' ? new PcmFramer(format) : undefined;
    const bitrate = o.bitrate ?? defaultBitrate(format.channels);
    return new StreamEncoder(format, rate, (rate * frameMs) / 1000, bitrate, resampler, framer);
  }

  push(pcm: Uint8Array): EncodeResult {
    if (this.ended) throw new Error('StreamEncoder: push after end');
    const t0 = performance.now();
    const packets: Buffer[] = [];
    if (!this.framer) {
      this.s16leBytes += pcm.length;
      this.addBytes(pcm, packets);
    } else {
      const bytes = this.framer.take(pcm);
      if (bytes.length > 0) {
        if (this.resampler) this.addInt16(toInt16(this.resampler.push(this.framer.toFloat32(bytes))), packets);
        else this.addInt16(this.framer.toInt16(bytes), packets);
      }
    }
    return { packets, seconds: (performance.now() - t0) / 1000 };
  }

  end(): EndResult {
    if (this.ended) throw new Error('StreamEncoder: end twice');
    this.ended = true;
    const t0 = performance.now();
    const packets: Buffer[] = [];
    if (this.resampler) {
      this.addInt16(toInt16(this.resampler.flush()), packets);
      this.resampler.destroy();
    }
    const ch = this.format.channels;
    const inputFrames = this.framer ? this.framer.frames : Math.floor(this.s16leBytes / (2 * ch));
    const endGranule = ENCODER_PRE_SKIP + Math.round((inputFrames * 48000) / this.format.sampleRate);
    // Encode silence until the decoder (delayed by the lookahead) has given back every input sample.
    const needed = Math.ceil((endGranule * this.rate) / 48000);
    const bytesPerFrame = 2 * ch;
    while (this.samplesEncoded + Math.floor(this.fill / bytesPerFrame) < needed || this.fill > 0) {
      this.frame.fill(0, this.fill);
      this.encodeFrame(this.frame, packets);
      this.fill = 0;
    }
    return { packets, endGranule, seconds: (performance.now() - t0) / 1000 };
  }

  /** Releases the resampler without encoding a tail (abandoned streams). */
  destroy(): void {
    if (!this.ended) this.resampler?.destroy();
    this.ended = true;
  }

  private addInt16(samples: Int16Array, packets: Buffer[]): void {
    this.addBytes(new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength), packets);
  }

  /** s16le bytes in any chunking: whole frames straight from the input, partial ones via `frame`. */
  private addBytes(b: Uint8Array, packets: Buffer[]): void {
    const size = this.frame.length;
    let off = 0;
    if (this.fill > 0) {
      off = Math.min(size - this.fill, b.length);
      this.frame.set(b.subarray(0, off), this.fill);
      this.fill += off;
      if (this.fill < size) return;
      this.encodeFrame(this.frame, packets);
      this.fill = 0;
    }
    // Whole frames are encoded in place (the binding reads them synchronously) when 2-byte aligned.
    if ((b.byteOffset + off) % 2 === 0) {
      for (; off + size <= b.length; off += size)
        this.encodeFrame(Buffer.from(b.buffer, b.byteOffset + off, size), packets);
    }
    for (; off + size <= b.length; off += size) {
      this.frame.set(b.subarray(off, off + size));
      this.encodeFrame(this.frame, packets);
    }
    if (off < b.length) {
      this.frame.set(b.subarray(off), 0);
      this.fill = b.length - off;
    }
  }

  private encodeFrame(frame: Buffer, packets: Buffer[]): void {
    packets.push(this.encoder.encode(frame)); // a copy: the frame's bytes may be reused
    this.samplesEncoded += this.frameSize;
  }
}

function toInt16(samples: Float32Array): Int16Array {
  const s = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) s[i] = floatToInt16(samples[i]);
  return s;
}
