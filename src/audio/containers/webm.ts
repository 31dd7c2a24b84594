// Incremental WebM/Matroska parser, hand-written: prism-media's WebmDemuxer yields packets but not
// byte offsets, and re-chunking passthrough audio needs to cut at element boundaries and know
// where the headers end. Handles live browser WebM (unknown-size Segment and Clusters).
import { echo } from '../../protocol/index.js';
import { opusPacketSamples48 } from '../transcode/index.js';
import { ByteQueue } from './byte-queue.js';
import { Resync, type Verdict } from './resync.js';
import {
  collectUnits,
  MalformedAudio,
  type ContainerParser,
  type Continuation,
  type PacketSink,
  type TrackInfo,
  type Unit,
} from './unit.js';

export const ID = {
  EBML: 0x1a45dfa3,
  DocType: 0x4282,
  Segment: 0x18538067,
  Cluster: 0x1f43b675,
  Info: 0x1549a966,
  TimecodeScale: 0x2ad7b1,
  Tracks: 0x1654ae6b,
  TrackEntry: 0xae,
  TrackNumber: 0xd7,
  TrackType: 0x83,
  CodecID: 0x86,
  CodecPrivate: 0x63a2,
  Audio: 0xe1,
  SamplingFrequency: 0xb5,
  Channels: 0x9f,
  BitDepth: 0x6264,
  Timecode: 0xe7,
  SimpleBlock: 0xa3,
  BlockGroup: 0xa0,
  Block: 0xa1,
  BlockDuration: 0x9b,
};

/** Top-level elements a stream may carry between Clusters (Cues, Tags, SeekHead); not Void, whose
 * one-byte id random bytes match too often. */
const TOP_LEVEL = new Set([0x1c53bb6b, 0x1254c367, 0x114d9b74]);
/** The largest element (a Cluster of known size: 64 ×) taken as plausible after a gap. */
const MAX_RESYNC_ELEMENT = 1 << 20;

/** A Cluster's id and an unknown size (a continuation's Cluster head; its end is not known). */
export const LIVE_CLUSTER = Buffer.from([0x1f, 0x43, 0xb6, 0x75, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

/** Elements entered rather than read whole (they may be live, with unknown size). */
const DESCEND = new Set([ID.Segment, ID.Cluster]);

function vintLength(first: number): number {
  for (let i = 0; i < 8; i++) if (first & (0x80 >> i)) return i + 1;
  return 0;
}

export interface Vint {
  value: number;
  length: number;
  unknown: boolean;
}

/** An EBML variable-size integer; `keepMarker` for element ids. undefined: need more bytes. `out`:
 * an object of the caller's to write it into (the parsers read several per audio block: reusing
 * one each saves an allocation per read on the hot path); read its fields before the next call. */
export function readVint(b: Buffer, off: number, keepMarker: boolean, out?: Vint): Vint | undefined {
  if (off >= b.length) return undefined;
  const len = vintLength(b[off]);
  if (len === 0) throw new MalformedAudio('invalid EBML variable-size integer');
  if (off + len > b.length) return undefined;
  let value = keepMarker ? b[off] : b[off] & (0xff >> len);
  let allOnes = value === 0xff >> len;
  for (let i = 1; i < len; i++) {
    value = value * 256 + b[off + i];
    if (b[off + i] !== 0xff) allOnes = false;
  }
  const v = out ?? { value: 0, length: 0, unknown: false };
  v.value = value;
  v.length = len;
  v.unknown = !keepMarker && allOnes;
  return v;
}

/** Reused by the parser's step (an element's id and size) and block (its track number). */
const STEP_ID: Vint = { value: 0, length: 0, unknown: false };
const STEP_SIZE: Vint = { value: 0, length: 0, unknown: false };
const BLOCK_TRACK: Vint = { value: 0, length: 0, unknown: false };

/** Children of a master element's body: [id, data]. */
export function* children(body: Buffer): Generator<[number, Buffer]> {
  let off = 0;
  while (off < body.length) {
    const id = readVint(body, off, true);
    const size = id && readVint(body, off + id.length, false);
    if (!id || !size || size.unknown)
      throw new MalformedAudio(
        `EBML element at byte ${off} of its parent's ${body.length} has no complete id and size`,
      );
    const start = off + id.length + size.length;
    if (start + size.value > body.length)
      throw new MalformedAudio(
        `EBML element 0x${id.value.toString(16)} declares ${size.value} bytes but its parent has ${body.length - start} left`,
      );
    yield [id.value, body.subarray(start, start + size.value)];
    off = start + size.value;
  }
}

export function uint(b: Buffer): number {
  if (b.length > 8) throw new MalformedAudio(`EBML unsigned integer of ${b.length} bytes (at most 8)`);
  let v = 0;
  for (const x of b) v = v * 256 + x;
  return v;
}

function float(b: Buffer): number {
  return b.length === 4 ? b.readFloatBE(0) : b.length === 8 ? b.readDoubleBE(0) : 0;
}

const CODECS: Record<string, string> = {
  A_OPUS: 'opus',
  A_VORBIS: 'vorbis',
  'A_PCM/FLOAT/IEEE': 'pcm-f32',
  'A_PCM/INT/LIT': 'pcm-s16',
};

/** A block's times, read by block() for a run (never held). */
const BLOCK_TIMES: Unit = { bytes: Buffer.alloc(0), header: false, start: undefined, end: undefined };

export interface WebmParserOptions {
  /** Consecutive SimpleBlocks of the audio track that lie end to end in one client piece are one unit
   *  of up to this much media (a run), not a unit each; 0: a unit per block. Runs are for audio
   *  passed through (Opus, Vorbis): PCM blocks stay a unit each, for their payload. */
  runSeconds?: number;
  /** each unlaced Opus block's packet (laced ones, which browsers do not write, are not told) */
  onPacket?: PacketSink;
}

export class WebmParser implements ContainerParser {
  info: TrackInfo | undefined;
  private q = new ByteQueue();
  private need = 1;
  private readonly runSeconds: number;
  /** The open run: its memory (a queued chunk), its byte range in it and its media. */
  private runIn: Buffer | undefined;
  private runFrom = 0;
  private runTo = 0;
  private runStart = 0;
  private runEnd = 0;
  private inHeader = true;
  private docTypeOk = false;
  private track = -1;
  private timecodeScale = 1e6; // ns per tick
  private clusterTime = 0;
  private lastStart: number | undefined;
  private lastDuration = 0;
  /** after a continuation's gap: where its first block must start, else it is skipped from */
  private expect?: Continuation['expect'];
  private mistimed = false;
  private resync = new Resync({
    head: (b, _gapAt, paused) => {
      const e = this.element(b, 0);
      if (e.verdict !== 'yes' || e.id === ID.Cluster) return e.verdict;
      // Paused with exactly this element queued: nothing after it may ever come to vouch for it.
      return paused && e.end === b.length ? 'yes' : this.element(b, e.end).verdict;
    },
    at: (b, off) => {
      const e = this.element(b, off);
      return e.verdict === 'yes' && e.id !== ID.Cluster ? 'no' : e.verdict;
    },
  });

  private readonly onPacket?: PacketSink;

  constructor(o: WebmParserOptions = {}) {
    this.runSeconds = o.runSeconds ?? 0;
    this.onPacket = o.onPacket;
  }

  get bufferedBytes(): number {
    return this.q.length;
  }
  get gapBytes(): number {
    return this.resync.skipped;
  }

  gap(expect?: Continuation['expect']): Unit[] {
    this.resync.gap(this.q);
    this.need = 1;
    this.expect = expect;
    return [];
  }

  /** Inside a Cluster: its head (unknown size) and Timecode, then the input not parsed yet (the
   * start of an element the rest of the stream completes), so blocks that follow are timed as here;
   * and where the next block starts. A block timed elsewhere after it means bytes went missing in
   * between (maybe a new Cluster's head, which would time it wrongly): skipped to the next Cluster. */
  continuation(): Continuation | undefined {
    if (this.inHeader || this.resync.active) return undefined;
    const timecode = Buffer.from([ID.Timecode, 0x88, 0, 0, 0, 0, 0, 0, 0, 0]);
    timecode.writeBigUInt64BE(BigInt(this.clusterTime), 2);
    const bytes = Buffer.concat([LIVE_CLUSTER, timecode, this.q.peek(this.q.length)]);
    const known = this.lastStart !== undefined && this.lastDuration > 0;
    return {
      bytes,
      expect: known ? { at: this.lastStart! + this.lastDuration, within: this.lastDuration / 2 } : undefined,
    };
  }

  push(chunk: Buffer): Unit[] {
    this.q.push(chunk);
    if (!this.resync.ready(this.q)) return [];
    return this.parseQueued();
  }

  /** A flush or the end: an element held after a gap only for want of the next one goes out. */
  pause(): Unit[] {
    if (!this.resync.pause(this.q)) return [];
    return this.parseQueued();
  }

  private parseQueued(): Unit[] {
    const units = collectUnits(() =>
      this.q.length >= this.need && this.resync.ready(this.q) ? this.step() : undefined,
    );
    const run = this.closeRun(); // a run never waits for the next piece: its bytes are taken
    if (run) units.push(run);
    return units;
  }

  /** Could a live stream go on from an element at `off`: a Cluster with its Timecode first, a
   * block of the audio track, a Timecode, or a top-level element, each of a plausible size. */
  private element(b: Buffer, off: number): { verdict: Verdict; id?: number; end: number } {
    const no = { verdict: 'no' as const, end: off },
      more = { verdict: 'more' as const, end: off };
    if (off >= b.length) return more;
    let id: Vint | undefined, size: Vint | undefined;
    try {
      id = readVint(b, off, true);
      size = id && readVint(b, off + id.length, false);
    } catch {
      return no;
    }
    if (!id || !size) return more;
    const body = off + id.length + size.length;
    if (id.value === ID.Cluster) {
      if (!size.unknown && size.value > MAX_RESYNC_ELEMENT * 64) return no;
      if (b.length < body + 2) return more;
      return b[body] === 0xe7 && b[body + 1] >= 0x81 && b[body + 1] <= 0x88
        ? { verdict: 'yes', id: id.value, end: body }
        : no;
    }
    if (size.unknown || size.value > MAX_RESYNC_ELEMENT) return no;
    const known = { verdict: 'yes' as const, id: id.value, end: body + size.value };
    if (id.value === ID.Timecode) return size.value >= 1 && size.value <= 8 ? known : no;
    if (TOP_LEVEL.has(id.value)) return known;
    if (id.value !== ID.SimpleBlock && id.value !== ID.BlockGroup) return no;
    // A block: its track number (inside the Block child of a BlockGroup) is the audio track's.
    const at = id.value === ID.SimpleBlock ? body : body + 2;
    if (b.length < at + 1) return more;
    if (id.value === ID.BlockGroup && b[body] !== 0xa1) return no;
    const track = readVint(b, at, false);
    if (!track) return more;
    return track.value === this.track ? known : no;
  }

  /** One element (or a descended element's head) if complete; sets `need` otherwise. */
  private step(): Unit | Unit[] | undefined {
    // An id (≤ 4 bytes) and a size (≤ 8) read in place.
    const b = this.q.contiguous(Math.min(this.q.length, 12)),
      at = this.q.start;
    const id = readVint(b, at, true, STEP_ID);
    const size = id && readVint(b, at + id.length, false, STEP_SIZE);
    if (id && id.length > 4)
      throw new MalformedAudio(`EBML element id of ${id.length} bytes at byte ${this.q.offset} (at most 4)`);
    if (!id || !size) {
      this.need = this.q.length + 1;
      return undefined;
    }
    const headLen = id.length + size.length;
    if (this.runIn && id.value !== ID.SimpleBlock) return this.closeRun(); // read again next
    if (!this.docTypeOk && id.value !== ID.EBML)
      throw new MalformedAudio(
        `WebM element 0x${id.value.toString(16)} at byte ${this.q.offset} comes before the EBML header`,
      );
    if (DESCEND.has(id.value)) {
      if (id.value === ID.Cluster) {
        this.inHeader = false;
        this.expect = undefined; // its blocks are timed by its own Timecode
      }
      this.need = 1;
      const at = id.value === ID.Cluster ? this.q.offset : undefined;
      return { bytes: this.q.take(headLen), header: this.inHeader, at };
    }
    if (size.unknown)
      throw new MalformedAudio(
        `EBML element 0x${id.value.toString(16)} at byte ${this.q.offset} has an unknown size (only a Segment or Cluster may)`,
      );
    const total = headLen + size.value;
    if (this.q.length < total) {
      this.need = total;
      return undefined;
    }
    this.need = 1;
    if (id.value === ID.SimpleBlock && this.runSeconds > 0) {
      const r = this.runBlock(headLen, total);
      if (r === 'taken') {
        this.q.skip(total);
        return [];
      }
      if (r === 'close') return this.closeRun();
    }
    const bytes = this.q.take(total);
    // Every field block() may set, set now: one object shape, no property store added per block.
    const unit: Unit = { bytes, header: this.inHeader, start: undefined, end: undefined };
    switch (id.value) {
      case ID.SimpleBlock:
        this.block(bytes, headLen, bytes.length, undefined, unit);
        break; // the hot path: no view of the body
      case ID.EBML:
        this.ebmlHeader(bytes.subarray(headLen));
        break;
      case ID.Info:
        for (const [cid, d] of children(bytes.subarray(headLen)))
          if (cid === ID.TimecodeScale) this.timecodeScale = uint(d);
        break;
      case ID.Tracks:
        this.tracks(bytes.subarray(headLen));
        break;
      case ID.Timecode:
        this.clusterTime = uint(bytes.subarray(headLen));
        break;
      case ID.BlockGroup: {
        let blk: Buffer | undefined, dur: number | undefined;
        for (const [cid, d] of children(bytes.subarray(headLen))) {
          if (cid === ID.Block) blk = d;
          else if (cid === ID.BlockDuration) dur = uint(d);
        }
        if (blk) this.block(blk, 0, blk.length, dur, unit);
        break;
      }
    }
    if (!this.mistimed) return unit;
    this.mistimed = false;
    this.resync.scan(bytes.length);
    return [];
  }

  /** The SimpleBlock of `total` bytes at the queue's head: taken into the open run or a new one,
   *  or the open run ends before it ('close': it is read again), or it is a unit of its own. A run
   *  holds blocks of the audio track, end to end in one queued chunk, timed in order. */
  private runBlock(headLen: number, total: number): 'taken' | 'close' | 'unit' {
    const b = this.q.contiguous(total),
      at = this.q.start;
    const notRun = this.runIn ? 'close' : 'unit';
    const codec = this.info?.codec;
    if (this.inHeader || this.expect || codec === 'pcm-f32' || codec === 'pcm-s16') return notRun;
    const tn = readVint(b, at + headLen, false, BLOCK_TRACK);
    if (!tn || tn.value !== this.track || total < headLen + tn.length + 3) return notRun;
    const start = ((this.clusterTime + b.readInt16BE(at + headLen + tn.length)) * this.timecodeScale) / 1e9;
    if (this.runIn) {
      const last = this.lastStart ?? start;
      const duration = start > last ? start - last : this.lastDuration;
      const fits = start >= last && start + duration - this.runStart <= this.runSeconds + 1e-9;
      if (b !== this.runIn || at !== this.runTo || !fits) return 'close';
    }
    this.block(b, at + headLen, at + total, undefined, BLOCK_TIMES);
    if (!this.runIn) {
      this.runIn = b;
      this.runFrom = at;
      this.runStart = start;
    }
    this.runEnd = Math.max(this.runEnd, BLOCK_TIMES.end ?? start);
    this.runTo = at + total;
    return 'taken';
  }

  /** The open run as one unit, if there is one. */
  private closeRun(): Unit | undefined {
    const b = this.runIn;
    if (!b) return undefined;
    this.runIn = undefined;
    const unit: Unit = {
      bytes: b.subarray(this.runFrom, this.runTo),
      header: false,
      start: this.runStart,
      end: this.runEnd,
    };
    this.runEnd = 0;
    return unit;
  }

  private ebmlHeader(body: Buffer): void {
    for (const [cid, d] of children(body)) {
      if (cid === ID.DocType) {
        const t = d.toString('latin1').replace(/\0+$/, '');
        if (t !== 'webm' && t !== 'matroska') throw new MalformedAudio(`EBML DocType ${echo(t)} is not WebM/Matroska`);
      }
    }
    this.docTypeOk = true;
  }

  private tracks(body: Buffer): void {
    for (const [cid, entry] of children(body)) {
      if (cid !== ID.TrackEntry) continue;
      let num = -1,
        codec = '',
        type = 0,
        rate: number | undefined,
        channels = 1;
      for (const [eid, d] of children(entry)) {
        if (eid === ID.TrackNumber) num = uint(d);
        else if (eid === ID.TrackType) type = uint(d);
        else if (eid === ID.CodecID) codec = d.toString('latin1').replace(/\0+$/, '');
        else if (eid === ID.Audio) {
          for (const [aid, a] of children(d)) {
            if (aid === ID.SamplingFrequency) rate = float(a);
            else if (aid === ID.Channels) channels = uint(a);
          }
        }
      }
      // The first audio track decides (a video track ahead of it is not audio for us).
      if (type === 2 || codec.startsWith('A_')) {
        this.track = num;
        this.info = { codec: CODECS[codec] ?? codec, sampleRate: rate, channels };
        return;
      }
    }
    this.info = { codec: 'none' };
  }

  /** A block whose body starts at `off` in `b` (and runs to its end). */
  private block(b: Buffer, off: number, end: number, durationTicks: number | undefined, unit: Unit): void {
    const tn = readVint(b, off, false, BLOCK_TRACK);
    if (!tn || end < off + tn.length + 3)
      throw new MalformedAudio(
        `WebM block of ${end - off} bytes is too short for its track number, timecode and flags`,
      );
    if (tn.value !== this.track) return;
    const ticks = this.clusterTime + b.readInt16BE(off + tn.length);
    const start = (ticks * this.timecodeScale) / 1e9;
    const flags = b[off + tn.length + 2];
    const from = off + tn.length + 3; // the payload
    const codec = this.info?.codec;
    const pcm = codec === 'pcm-f32' || codec === 'pcm-s16';
    let duration: number;
    if (durationTicks !== undefined) duration = (durationTicks * this.timecodeScale) / 1e9;
    else if (pcm) {
      const bytesPerFrame = (codec === 'pcm-f32' ? 4 : 2) * (this.info?.channels ?? 1);
      duration = (end - from) / bytesPerFrame / (this.info?.sampleRate ?? 48000);
    } else {
      // Without BlockDuration a block lasts until the next one: assume the previous spacing.
      if (this.lastStart !== undefined && start > this.lastStart) this.lastDuration = start - this.lastStart;
      duration = this.lastDuration;
    }
    if (this.expect) {
      this.mistimed = Math.abs(start - this.expect.at) > this.expect.within;
      this.expect = undefined;
    }
    this.lastStart = start;
    unit.start = start;
    unit.end = start + duration;
    // Only PCM is transcoded from WebM (Opus and Vorbis pass through): only it needs the payload.
    if (pcm && (flags & 0x06) === 0)
      unit.payload = [b.subarray(from, end)]; // unlaced: the payload is one frame
    else if (codec === 'opus' && (flags & 0x06) === 0 && this.onPacket) this.packet(b, from, end, start);
  }

  /** An Opus block's packet to onPacket, its duration from its TOC (a live stream's blocks carry
   *  none, and the first block has no spacing to go by); a packet too short to say is not told. */
  private packet(b: Buffer, from: number, end: number, start: number): void {
    let samples: number;
    try {
      samples = opusPacketSamples48(b.subarray(from, end));
    } catch {
      return;
    }
    this.onPacket!(b, from, end - from, start, samples / 48000);
  }
}
