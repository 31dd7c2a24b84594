// Incremental Ogg page parser, hand-written: prism-media's OggDemuxer yields packets, not pages,
// and re-chunking passthrough audio must cut at page boundaries and know where the header pages
// end. Also re-chunks the transcoder's own Ogg/Opus output.
import { oggCrc32 } from '../transcode/index.js';
import { ByteQueue } from './byte-queue.js';
import { prefixVerdict, Resync, type Verdict } from './resync.js';
import {
  collectUnits,
  MalformedAudio,
  type ContainerParser,
  type PacketSink,
  type TrackInfo,
  type Unit,
} from './unit.js';

export class OggParser implements ContainerParser {
  info: TrackInfo | undefined;
  private q = new ByteQueue();
  private serial: number | undefined;
  private headerPackets = Infinity; // header packets still to complete on the first stream
  private lastEnd = 0;
  private base = 0; // media time where the current chained stream starts

  private resync = new Resync({ head: (b) => verifiedPage(b, 0), at: verifiedPage });

  /** `onPacket`: each Opus packet that begins and ends on a media page (a page's time shared evenly
   *  among them: an encoder keeps one frame size), for the speech detector. */
  constructor(private readonly onPacket?: PacketSink) {}

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
    return collectUnits(() => this.page());
  }

  private page(): Unit | undefined {
    if (this.q.length < 27) return undefined;
    const h = this.q.peek(27);
    if (h.toString('latin1', 0, 4) !== 'OggS' || h[4] !== 0)
      throw new MalformedAudio(`no Ogg page (capture pattern OggS, version 0) at byte ${this.q.offset}`);
    const nseg = h[26];
    if (this.q.length < 27 + nseg) return undefined;
    const lacing = this.q.peek(27 + nseg).subarray(27);
    let bodyLen = 0;
    for (const l of lacing) bodyLen += l;
    if (this.q.length < 27 + nseg + bodyLen) return undefined;
    const at = this.q.offset;
    const bytes = this.q.take(27 + nseg + bodyLen);
    const serial = bytes.readUInt32LE(14);
    if (bytes[5] & 0x02 && this.serial !== undefined && this.headerPackets <= 0) {
      // A chained stream (BOS after the first one's headers): its time follows on.
      this.serial = serial;
      this.base = this.lastEnd;
      this.info = undefined;
      this.headerPackets = Infinity;
    }
    if (this.serial === undefined) this.serial = serial;
    if (serial !== this.serial) return { bytes, header: false }; // a multiplexed stream: pass along
    const wasHeader = this.headerPackets > 0;
    if (wasHeader) {
      // Packets completed on this page (a lacing value < 255 ends one); the first identifies the codec.
      let first = -1,
        count = 0,
        off = 0;
      for (const l of lacing) {
        off += l;
        if (l < 255) {
          count++;
          if (first < 0) first = off;
        }
      }
      if (this.info === undefined) this.identify(bytes.subarray(27 + nseg, 27 + nseg + (first < 0 ? bodyLen : first)));
      this.headerPackets -= count;
    }
    const granule = readGranule(bytes);
    const unit: Unit = { bytes, header: wasHeader, at };
    if (!wasHeader && granule >= 0 && this.info?.sampleRate) {
      const rate = this.info.codec === 'opus' ? 48000 : this.info.sampleRate;
      const end = this.base + Math.max(0, granule - (this.info.preSkip ?? 0)) / rate;
      unit.start = this.lastEnd;
      unit.end = Math.max(end, this.lastEnd);
      this.lastEnd = unit.end;
      if (this.onPacket && this.info.codec === 'opus') this.packets(bytes, nseg, unit.start, unit.end);
    }
    return unit;
  }

  /** The page's whole packets to onPacket: one continued from the page before (flag 1) is skipped,
   *  and so is one that goes on to the next page (its last lacing value 255). */
  private packets(page: Buffer, nseg: number, start: number, end: number): void {
    let whole = 0;
    for (let i = 0; i < nseg; i++) if (page[27 + i] < 255) whole++;
    if (whole === 0) return;
    const each = (end - start) / whole;
    let off = 27 + nseg;
    let from = off;
    let n = 0;
    let continued = (page[5] & 1) === 1;
    for (let i = 0; i < nseg; i++) {
      off += page[27 + i];
      if (page[27 + i] === 255) continue;
      if (!continued) this.onPacket!(page, from, off - from, start + n * each, each);
      continued = false;
      n++;
      from = off;
    }
  }

  private identify(p: Buffer): void {
    if (p.length >= 19 && p.toString('latin1', 0, 8) === 'OpusHead') {
      this.info = {
        codec: 'opus',
        channels: p[9],
        preSkip: p.readUInt16LE(10),
        inputSampleRate: p.readUInt32LE(12),
        sampleRate: 48000,
      };
      this.headerPackets = 2;
    } else if (p.length >= 16 && p[0] === 1 && p.toString('latin1', 1, 7) === 'vorbis') {
      this.info = { codec: 'vorbis', channels: p[11], sampleRate: p.readUInt32LE(12) };
      this.headerPackets = 3;
    } else {
      this.info = {
        codec: p
          .subarray(0, 8)
          .toString('latin1')
          .replace(/[^\x20-\x7e]/g, '?'),
      };
      this.headerPackets = 1;
    }
  }
}

/** A page's granule position, a signed 64-bit integer, read as two halves: no BigInt per page
 * (granules stay below 2^53: 5,900 years at 48 kHz). */
export function readGranule(page: Buffer): number {
  return page.readInt32LE(10) * 0x1_0000_0000 + page.readUInt32LE(6);
}

const CAPTURE = Buffer.from('OggS\0', 'latin1');

/** A whole page at `off` whose CRC checks (the CRC covers the page, so a page cut by a gap fails). */
function verifiedPage(b: Buffer, off: number): Verdict {
  if (b.length - off < 27) return prefixVerdict(b, off, CAPTURE);
  if (b.compare(CAPTURE, 0, 5, off, off + 5) !== 0 || b[off + 5] > 7) return 'no';
  const nseg = b[off + 26];
  if (b.length - off < 27 + nseg) return 'more';
  let len = 27 + nseg;
  for (let i = 0; i < nseg; i++) len += b[off + 27 + i];
  if (b.length - off < len) return 'more';
  const page = Buffer.from(b.subarray(off, off + len));
  const crc = page.readUInt32LE(22);
  page.writeUInt32LE(0, 22);
  return oggCrc32(page) === crc ? 'yes' : 'no';
}
