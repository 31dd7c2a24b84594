// Media time of the audio a session received. Opus (in Ogg or WebM, what the gateway sends and
// what browsers record) is counted exactly: prism-media's demuxers split the stream into packets
// in any chunking, and each packet's TOC byte gives its duration (each packet, with its media
// time, also goes to the clock's packet sink: the speech detector). Other codecs use a byte-rate
// estimate (exactness is not needed there):
//   Ogg/Vorbis: the nominal bitrate from the identification header (else 40 kb/s);
//   MP3: the bitrate of the first frame header (CBR assumed; else 48 kb/s);
//   FLAC: rate × channels × bits from STREAMINFO, times 0.55 (typical speech compression);
//   MP4/AAC: 56 kb/s; WebM without Opus: 64 kb/s; unrecognised bytes: 16 kHz s16 mono (32 kB/s).
import prism from 'prism-media';
import type { Transform } from 'node:stream';
import { opusPacketSeconds } from './opus-toc.js';
import { sniffContainer, type Container } from './sniff.js';

/** One Opus packet the clock counted: [start, start + seconds) of the stream's media. */
export type OpusPacketSink = (packet: Buffer, start: number, seconds: number) => void;

export interface MediaClock {
  readonly container: Container;
  /** Feeds one binary frame; returns the media seconds counted so far. */
  add(chunk: Buffer): number;
  readonly seconds: number;
}

class OpusClock implements MediaClock {
  // Counted in integer tenths of a millisecond (Opus frames are multiples of 2.5 ms), so whole
  // seconds come out whole instead of 8.999999.
  private units = 0;
  private broken = false;
  get seconds(): number {
    return this.units / 10_000;
  }

  constructor(
    readonly container: Container,
    private demuxer: Transform,
    onPacket?: OpusPacketSink,
  ) {
    // Packets are taken from push() so counting is synchronous with the frame that carried them.
    demuxer.push = (packet: unknown) => {
      if (!Buffer.isBuffer(packet)) return true;
      const units = Math.round(opusPacketSeconds(packet) * 10_000);
      onPacket?.(packet, this.units / 10_000, units / 10_000);
      this.units += units;
      return true;
    };
    // Malformed stream: keep estimating from bytes (24 kb/s) rather than stop counting.
    demuxer.on('error', () => (this.broken = true));
  }

  add(chunk: Buffer): number {
    if (this.broken) this.units += Math.round((chunk.length / 3000) * 10_000);
    else this.demuxer.write(chunk);
    return this.seconds;
  }
}

class ByteRateClock implements MediaClock {
  private bytes = 0;
  constructor(
    readonly container: Container,
    private bytesPerSecond: number,
  ) {}
  get seconds(): number {
    return this.bytes / this.bytesPerSecond;
  }
  add(chunk: Buffer): number {
    this.bytes += chunk.length;
    return this.seconds;
  }
}

const MP3_KBPS_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const MP3_KBPS_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];

function mp3BytesPerSecond(b: Buffer): number {
  let at = 0;
  if (b.subarray(0, 3).toString('latin1') === 'ID3' && b.length >= 10) {
    at = 10 + ((b[6] << 21) | (b[7] << 14) | (b[8] << 7) | b[9]); // syncsafe tag size
  }
  for (; at + 2 < b.length; at++) {
    if (b[at] === 0xff && (b[at + 1] & 0xe0) === 0xe0) {
      const mpeg1 = (b[at + 1] & 0x18) === 0x18;
      const kbps = (mpeg1 ? MP3_KBPS_V1 : MP3_KBPS_V2)[b[at + 2] >> 4];
      if (kbps) return (kbps * 1000) / 8;
    }
  }
  return 6000;
}

function vorbisBytesPerSecond(b: Buffer): number {
  const at = b.indexOf('\x01vorbis', 0, 'latin1');
  const nominal = at >= 0 && at + 24 <= b.length ? b.readInt32LE(at + 20) : 0;
  return nominal > 0 ? nominal / 8 : 5000;
}

function flacBytesPerSecond(b: Buffer): number {
  if (b.length < 8 + 18) return 17600;
  const info = b.subarray(8); // after 'fLaC' and the STREAMINFO block header
  const rate = (info[10] << 12) | (info[11] << 4) | (info[12] >> 4);
  const channels = ((info[12] >> 1) & 0x07) + 1;
  const bits = (((info[12] & 0x01) << 4) | (info[13] >> 4)) + 1;
  const raw = (rate * channels * bits) / 8;
  return raw > 0 ? raw * 0.55 : 17600;
}

/** Chooses the counter from the first binary frame of a session; `onPacket` hears its Opus packets. */
export function createMediaClock(first: Buffer, onPacket?: OpusPacketSink): MediaClock {
  const container = sniffContainer(first);
  switch (container) {
    case 'ogg':
      return first.includes('OpusHead', 0, 'latin1')
        ? new OpusClock(container, new prism.opus.OggDemuxer(), onPacket)
        : new ByteRateClock(container, vorbisBytesPerSecond(first));
    case 'webm':
      return first.includes('A_OPUS', 0, 'latin1')
        ? new OpusClock(container, new prism.opus.WebmDemuxer(), onPacket)
        : new ByteRateClock(container, 8000);
    case 'mp3':
      return new ByteRateClock(container, mp3BytesPerSecond(first));
    case 'flac':
      return new ByteRateClock(container, flacBytesPerSecond(first));
    case 'mp4':
      return new ByteRateClock(container, 7000);
    default:
      return new ByteRateClock(container, 32000);
  }
}
