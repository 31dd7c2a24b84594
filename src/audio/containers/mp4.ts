// Incremental MP4 box parser, hand-written: no npm demuxer streams fragmented MP4 with byte
// offsets. Handles Chromium's fragmented MP4 (ftyp, moov with an Opus/dOps sample entry, then
// moof+mdat) and plain files; a plain file whose moov comes after its mdat (not "faststart") is
// held until the moov arrives, which then goes out first with its chunk offsets moved accordingly
// (the one case where passthrough bytes are rearranged: the upstream can't decode without it).
import { echo } from '../../protocol/index.js';
import { ByteQueue } from './byte-queue.js';
import { prefixVerdict, Resync, type Verdict } from './resync.js';
import { collectUnits, MalformedAudio, needBytes, type ContainerParser, type TrackInfo, type Unit } from './unit.js';

const CONTAINERS = new Set(['moov', 'trak', 'mdia', 'minf', 'stbl', 'mvex', 'moof', 'traf', 'edts', 'dinf']);

/** How errors name a box (its type is client bytes: quoted and escaped). */
const box = (type: string) => `MP4 box ${echo(type)}`;

/** Child boxes of the body of box `parent`: [type, body, offset of the box in `b`]. */
function* boxes(b: Buffer, parent: string, from = 0): Generator<[string, Buffer, number]> {
  let off = from;
  while (off + 8 <= b.length) {
    const type = b.toString('latin1', off + 4, off + 8);
    let size = b.readUInt32BE(off);
    let head = 8;
    if (size === 1) {
      if (off + 16 > b.length)
        throw new MalformedAudio(`${box(type)} has a 64-bit size but its parent ${echo(parent)} ends before it`);
      size = Number(b.readBigUInt64BE(off + 8));
      head = 16;
    } else if (size === 0) size = b.length - off;
    if (size < head) throw new MalformedAudio(`${box(type)} declares ${size} bytes, less than its own header`);
    if (off + size > b.length)
      throw new MalformedAudio(
        `${box(type)} declares ${size} bytes but its parent ${echo(parent)} has ${b.length - off} left`,
      );
    yield [type, b.subarray(off + head, off + size), off];
    off += size;
  }
}

/** The body of the box at `path` under the body `b` of box `parent`. */
function find(b: Buffer, parent: string, path: string[]): Buffer | undefined {
  let cur = b,
    name = parent;
  for (const t of path) {
    let next: Buffer | undefined;
    for (const [type, body] of boxes(cur, name))
      if (type === t) {
        next = body;
        break;
      }
    if (!next) return undefined;
    cur = next;
    name = t;
  }
  return cur;
}

/** Boxes a fragmented stream carries between its fragments' starts; a moof must hold an mfhd first. */
const FRAGMENT_BOXES = new Set(['moof', 'mdat', 'free', 'skip', 'styp', 'sidx', 'emsg', 'prft']);
const MAX_RESYNC_BOX = 1 << 24;

/** A fragment-level box of a plausible size at `off`, and where it ends. */
function fragmentBox(b: Buffer, off: number): { verdict: Verdict; end: number } {
  if (b.length - off < 16) {
    // Too short to tell, unless the type bytes already there fit no fragment box.
    const fits =
      b.length - off <= 4 ||
      [...FRAGMENT_BOXES].some((t) => prefixVerdict(b, off + 4, Buffer.from(t, 'latin1')) === 'more');
    return { verdict: fits ? 'more' : 'no', end: off };
  }
  const size = b.readUInt32BE(off),
    type = b.toString('latin1', off + 4, off + 8);
  if (!FRAGMENT_BOXES.has(type) || size < 8 || size > MAX_RESYNC_BOX) return { verdict: 'no', end: off };
  if (type === 'moof' && b.toString('latin1', off + 12, off + 16) !== 'mfhd') return { verdict: 'no', end: off };
  return { verdict: 'yes', end: off + size };
}

/** MPEG-4 descriptor: tag and body; sizes use 7 bits a byte. */
function descriptor(b: Buffer, off: number): { tag: number; body: Buffer; next: number } | undefined {
  if (off + 2 > b.length) return undefined;
  const tag = b[off];
  let size = 0,
    p = off + 1;
  for (let i = 0; i < 4 && p < b.length; i++) {
    const x = b[p++];
    size = (size << 7) | (x & 0x7f);
    if (!(x & 0x80)) break;
  }
  if (p + size > b.length)
    throw new MalformedAudio(
      `MP4 esds descriptor 0x${tag.toString(16)} declares ${size} bytes but has ${b.length - p}`,
    );
  return { tag, body: b.subarray(p, p + size), next: p + size };
}

/** objectTypeIndication from an esds body: 0x40 AAC, 0x69/0x6B MP3. */
function esdsObjectType(esds: Buffer): number | undefined {
  const es = descriptor(esds, 4);
  if (!es || es.tag !== 3) return undefined;
  needBytes(es.body, 3, 'MP4 ES descriptor');
  const flags = es.body[2];
  let p = 3;
  if (flags & 0x80) p += 2; // dependsOn_ES_ID
  if (flags & 0x40) p += 1 + (es.body[p] ?? 0); // URL
  if (flags & 0x20) p += 2; // OCR_ES_Id
  while (p < es.body.length) {
    const d = descriptor(es.body, p);
    if (!d) return undefined;
    if (d.tag === 4) return d.body[0];
    p = d.next;
  }
  return undefined;
}

interface Track {
  id: number;
  timescale: number;
  duration: number;
  defDuration: number;
  defSize: number;
}

/** `count` samples alike (a trun without per-sample fields is one run, however many it declares). */
interface Samples {
  size: number;
  duration: number;
  count: number;
}

export class Mp4Parser implements ContainerParser {
  info: TrackInfo | undefined;
  private q = new ByteQueue();
  private need = 8;
  private track: Track | undefined;
  private deferred: Buffer[] = []; // mdat (and what follows it) before the moov
  private deferredBytes = 0;
  private time = 0;
  private liveMdat = false;
  private moovSamplesTimed = false;
  private fragment: { samples: Samples[]; start: number; dataOffset?: number; moofSize: number } | undefined;

  private resync = new Resync({
    // Boxes from the head up to one that starts after the gap: each a fragment box.
    head: (b, gapAt) => {
      for (let off = 0; ;) {
        const box = fragmentBox(b, off);
        if (box.verdict !== 'yes' || off >= gapAt) return box.verdict;
        off = box.end;
      }
    },
    at: (b, off) => {
      const v = fragmentBox(b, off);
      return v.verdict === 'yes' && b.toString('latin1', off + 4, off + 8) !== 'moof' ? 'no' : v.verdict;
    },
  });

  get bufferedBytes(): number {
    return this.q.length + this.deferredBytes;
  }
  get gapBytes(): number {
    return this.resync.skipped;
  }

  /** A live mdat without a size has no boundary after it: its bytes go on as they come. */
  gap(): Unit[] {
    if (this.liveMdat) return [];
    this.resync.gap(this.q);
    this.need = 8;
    return [];
  }

  push(chunk: Buffer): Unit[] {
    this.q.push(chunk);
    if (!this.resync.ready(this.q)) return [];
    return collectUnits(() => (this.q.length >= this.need ? this.step() : undefined));
  }

  private step(): Unit[] | undefined {
    if (this.liveMdat) {
      this.need = 1;
      return [{ bytes: this.q.takeAll(), header: false }];
    }
    const h = this.q.peek(Math.min(16, this.q.length));
    let size = h.readUInt32BE(0);
    const type = h.toString('latin1', 4, 8);
    if (!/^[\x20-\x7e]{4}$/.test(type)) throw new MalformedAudio('invalid MP4 box type');
    if (size === 1) {
      if (h.length < 16) {
        this.need = 16;
        return undefined;
      }
      size = Number(h.readBigUInt64BE(8));
    } else if (size === 0) size = Infinity; // to the end of the stream
    if (size < 8)
      throw new MalformedAudio(
        `${box(type)} at byte ${this.q.offset} declares ${size} bytes, less than its own header`,
      );
    if (!Number.isFinite(size) && type !== 'mdat')
      throw new MalformedAudio(
        `${box(type)} at byte ${this.q.offset} has size 0 (to the end of the stream): only an mdat may`,
      );
    if (!Number.isFinite(size)) {
      // Live mdat without a size: it runs to the end of the stream; its bytes go out as they come.
      this.liveMdat = true;
      this.need = 1;
      return [{ bytes: this.q.takeAll(), header: false }];
    }
    if (this.q.length < size) {
      this.need = size;
      return undefined;
    }
    if (type === 'moof') {
      const whole = this.withMdat(size);
      if (this.q.length < whole) {
        this.need = whole;
        return undefined;
      }
    }
    this.need = 8;
    const bytes = this.q.take(size);
    switch (type) {
      case 'moov':
        return this.moov(bytes);
      case 'moof':
        this.moof(bytes);
        return [{ bytes, header: false }];
      case 'mdat':
        if (!this.info) {
          this.deferred.push(bytes);
          this.deferredBytes += bytes.length;
          return [];
        }
        return this.mediaUnits(bytes);
      default:
        if (this.deferred.length) {
          this.deferred.push(bytes);
          this.deferredBytes += bytes.length;
          return [];
        }
        return [{ bytes, header: !this.info }];
    }
  }

  private moov(bytes: Buffer): Unit[] {
    const body = bytes.subarray(8);
    for (const [type, trak] of boxes(body, 'moov')) {
      if (type !== 'trak') continue;
      const hdlr = find(trak, 'trak', ['mdia', 'hdlr']);
      if (!hdlr || hdlr.toString('latin1', 8, 12) !== 'soun') continue;
      this.audioTrack(trak, body);
      break;
    }
    if (!this.info) this.info = { codec: 'none' };
    if (!this.deferred.length) return [{ bytes, header: true }];
    // moov after mdat: move it ahead of the held boxes, so every chunk offset grows by its size.
    shiftChunkOffsets(bytes, bytes.length);
    const held = Buffer.concat(this.deferred, this.deferredBytes);
    this.deferred = [];
    this.deferredBytes = 0;
    const seconds = this.track && this.track.timescale ? this.track.duration / this.track.timescale : 0;
    this.time = seconds;
    return [{ bytes, header: true }, ...spread(held, 0, seconds)];
  }

  private audioTrack(trak: Buffer, moov: Buffer): void {
    const tkhd = find(trak, 'trak', ['tkhd']);
    const mdhd = find(trak, 'trak', ['mdia', 'mdhd']);
    const stsd = find(trak, 'trak', ['mdia', 'minf', 'stbl', 'stsd']);
    if (!tkhd || !mdhd || !stsd) throw new MalformedAudio('MP4 audio track without tkhd/mdhd/stsd');
    needBytes(tkhd, tkhd[0] === 1 ? 24 : 16, box('tkhd'));
    const id = tkhd[0] === 1 ? tkhd.readUInt32BE(20) : tkhd.readUInt32BE(12);
    const v1 = mdhd[0] === 1;
    needBytes(mdhd, v1 ? 32 : 20, box('mdhd'));
    const timescale = mdhd.readUInt32BE(v1 ? 20 : 12);
    if (timescale === 0) throw new MalformedAudio(`${box('mdhd')} gives a timescale of 0`);
    const duration = v1 ? Number(mdhd.readBigUInt64BE(24)) : mdhd.readUInt32BE(16);
    this.track = { id, timescale, duration, defDuration: 0, defSize: 0 };
    for (const [type, trex] of boxes(find(moov, 'moov', ['mvex']) ?? Buffer.alloc(0), 'mvex')) {
      if (type !== 'trex') continue;
      needBytes(trex, 20, box('trex'));
      if (trex.readUInt32BE(4) === id) {
        this.track.defDuration = trex.readUInt32BE(12);
        this.track.defSize = trex.readUInt32BE(16);
      }
    }
    this.sampleEntry(stsd);
  }

  /** Codec, channels and rate from the first sample entry: 8 bytes of stsd fields, then the entry box. */
  private sampleEntry(stsd: Buffer): void {
    const first = boxes(stsd, 'stsd', 8).next();
    if (first.done) throw new MalformedAudio(`${box('stsd')} has no sample entry`);
    const [format, entry] = first.value;
    needBytes(entry, 28, `MP4 sample entry ${echo(format)}`);
    const channels = entry.readUInt16BE(16),
      sampleRate = entry.readUInt32BE(24) >>> 16;
    const ext = entry.subarray(28);
    if (format === 'Opus') {
      const dOps = find(ext, format, ['dOps']);
      if (!dOps) throw new MalformedAudio('MP4 Opus sample entry without dOps');
      needBytes(dOps, 11, box('dOps'));
      this.info = {
        codec: 'opus',
        channels: dOps[1],
        preSkip: dOps.readUInt16BE(2),
        inputSampleRate: dOps.readUInt32BE(4),
        sampleRate: 48000,
      };
    } else if (format === 'mp4a') {
      const esds = find(ext, format, ['esds']);
      const ot = esds && esdsObjectType(esds);
      const codec =
        ot === 0x40 || ot === 0x66 || ot === 0x67 || ot === 0x68
          ? 'aac'
          : ot === 0x69 || ot === 0x6b
            ? 'mp3'
            : `mp4a-0x${(ot ?? 0).toString(16)}`;
      this.info = { codec, channels, sampleRate };
    } else if (format === '.mp3') this.info = { codec: 'mp3', channels, sampleRate };
    else this.info = { codec: format.trim(), channels, sampleRate };
  }

  private moof(bytes: Buffer): void {
    const t = this.track;
    if (!t) throw new MalformedAudio('MP4 fragment before its moov');
    for (const [type, traf] of boxes(bytes.subarray(8), 'moof')) {
      if (type !== 'traf') continue;
      const tfhd = find(traf, 'traf', ['tfhd']);
      if (!tfhd) continue;
      needBytes(tfhd, 8, box('tfhd'));
      if (tfhd.readUInt32BE(4) !== t.id) continue;
      const ff = tfhd.readUInt32BE(0) & 0xffffff;
      let p = 8;
      if (ff & 0x1) p += 8;
      if (ff & 0x2) p += 4;
      needBytes(tfhd, p + (ff & 0x8 ? 4 : 0) + (ff & 0x10 ? 4 : 0), box('tfhd'));
      let defDuration = t.defDuration,
        defSize = t.defSize;
      if (ff & 0x8) {
        defDuration = tfhd.readUInt32BE(p);
        p += 4;
      }
      if (ff & 0x10) defSize = tfhd.readUInt32BE(p);
      const tfdt = find(traf, 'traf', ['tfdt']);
      if (tfdt) needBytes(tfdt, tfdt[0] === 1 ? 12 : 8, box('tfdt'));
      const start = tfdt
        ? (tfdt[0] === 1 ? Number(tfdt.readBigUInt64BE(4)) : tfdt.readUInt32BE(4)) / t.timescale
        : this.time;
      const samples: Samples[] = [];
      let dataOffset: number | undefined;
      for (const [rt, trun] of boxes(traf, 'traf')) {
        if (rt !== 'trun') continue;
        const r = trunSamples(trun, defDuration, defSize, samples);
        dataOffset ??= r;
      }
      this.fragment = { samples, start, dataOffset, moofSize: bytes.length };
      return;
    }
  }

  /** Bytes of a moof of `size` and the mdat after it: a moof goes on only with its samples, so
   * that a gap never leaves one whose mdat was lost (its data offsets would point elsewhere). */
  private withMdat(size: number): number {
    if (this.q.length < size + 8) return size + 8;
    const h = this.q.peek(size + 8).subarray(size);
    const mdat = h.readUInt32BE(0);
    return h.toString('latin1', 4, 8) === 'mdat' && mdat >= 8 ? size + mdat : size;
  }

  /** An mdat: media time from the fragment's samples (or the running time), Opus packets as payload. */
  private mediaUnits(bytes: Buffer): Unit[] {
    const f = this.fragment;
    this.fragment = undefined;
    if (!this.track) return [{ bytes, header: false }];
    if (!f) {
      // Samples described in the moov itself (a plain file, or the part of a fragmented file
      // before its first moof): mdhd's duration is theirs.
      if (this.moovSamplesTimed || !this.track.timescale) return [{ bytes, header: false }];
      this.moovSamplesTimed = true;
      const start = this.time;
      this.time += this.track.duration / this.track.timescale;
      return spread(bytes, start, this.time);
    }
    const ticks = f.samples.reduce((s, x) => s + x.duration * x.count, 0);
    const start = f.start,
      end = start + ticks / this.track.timescale;
    this.time = end;
    // Data offsets count from the moof's first byte; the mdat's payload starts after its 8-byte head.
    let off = f.dataOffset !== undefined ? f.dataOffset - f.moofSize : 8;
    if (off < 8)
      throw new MalformedAudio(
        `MP4 trun data offset ${f.dataOffset} points before the payload of the mdat after its moof`,
      );
    const payload: Buffer[] = [];
    for (const s of f.samples) {
      if (s.size === 0) continue; // nothing to carry, however many
      if (off + s.size * s.count > bytes.length)
        throw new MalformedAudio(
          `MP4 trun samples end at byte ${off + s.size * s.count} of an mdat of ${bytes.length} bytes`,
        );
      for (let i = 0; i < s.count; i++, off += s.size) payload.push(bytes.subarray(off, off + s.size));
    }
    return [{ bytes, header: false, start, end, payload }];
  }
}

/** Appends a trun's samples to `out`; returns its data offset, if it has one. */
function trunSamples(trun: Buffer, defDuration: number, defSize: number, out: Samples[]): number | undefined {
  needBytes(trun, 8, box('trun'));
  const tf = trun.readUInt32BE(0) & 0xffffff;
  const count = trun.readUInt32BE(4);
  let q = 8 + (tf & 0x1 ? 4 : 0) + (tf & 0x4 ? 4 : 0);
  needBytes(trun, q, box('trun'));
  const dataOffset = tf & 0x1 ? trun.readInt32BE(8) : undefined;
  const per = 4 * (((tf >> 8) & 1) + ((tf >> 9) & 1) + ((tf >> 10) & 1) + ((tf >> 11) & 1));
  if (per === 0) {
    out.push({ size: defSize, duration: defDuration, count });
    return dataOffset;
  }
  if (q + count * per > trun.length)
    throw new MalformedAudio(
      `${box('trun')} declares ${count} samples of ${per} bytes but has ${trun.length - q} bytes for them`,
    );
  for (let i = 0; i < count; i++) {
    let duration = defDuration,
      size = defSize;
    if (tf & 0x100) {
      duration = trun.readUInt32BE(q);
      q += 4;
    }
    if (tf & 0x200) {
      size = trun.readUInt32BE(q);
      q += 4;
    }
    if (tf & 0x400) q += 4;
    if (tf & 0x800) q += 4;
    out.push({ size, duration, count: 1 });
  }
  return dataOffset;
}

/** A whole track's mdat as units of about 50 ms each (byte-proportional times), so that it is
 * re-chunked and paced like any other stream instead of going out in 64000-byte pieces. */
function spread(bytes: Buffer, start: number, end: number): Unit[] {
  const n = Math.max(1, Math.min(Math.ceil((end - start) / 0.05), Math.ceil(bytes.length / 64)));
  const out: Unit[] = [];
  for (let i = 0; i < n; i++) {
    const a = Math.floor((bytes.length * i) / n),
      b = Math.floor((bytes.length * (i + 1)) / n);
    out.push({
      bytes: bytes.subarray(a, b),
      header: false,
      start: start + ((end - start) * i) / n,
      end: start + ((end - start) * (i + 1)) / n,
    });
  }
  return out;
}

/** Adds `delta` to every stco/co64 entry inside a moov (in place). */
function shiftChunkOffsets(moov: Buffer, delta: number): void {
  const walk = (b: Buffer, parent: string) => {
    for (const [type, body] of boxes(b, parent)) {
      if (CONTAINERS.has(type)) walk(body, type);
      else if (type === 'stco' || type === 'co64') {
        const width = type === 'stco' ? 4 : 8;
        needBytes(body, 8, box(type));
        const n = body.readUInt32BE(4);
        if (8 + n * width > body.length)
          throw new MalformedAudio(
            `${box(type)} declares ${n} chunk offsets but has room for ${Math.floor((body.length - 8) / width)}`,
          );
        for (let p = 8; p < 8 + n * width; p += width) {
          const v = (width === 4 ? BigInt(body.readUInt32BE(p)) : body.readBigUInt64BE(p)) + BigInt(delta);
          if (v >= 1n << BigInt(8 * width))
            throw new MalformedAudio(
              `${box(type)} chunk offset ${v - BigInt(delta)} overflows once the moov moves ahead of the mdat`,
            );
          if (width === 4) body.writeUInt32BE(Number(v), p);
          else body.writeBigUInt64BE(v, p);
        }
      }
    }
  };
  walk(moov.subarray(8), 'moov');
}
