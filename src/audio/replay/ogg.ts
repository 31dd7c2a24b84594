// Ogg replay: the chain's header pages (OpusHead/OpusTags, or Vorbis's three), then pages from the
// Opus packet that holds the end of the last final (the first kept page rebuilt to start with it;
// Vorbis: from a page that starts a packet), granule positions lowered by the granule before that
// packet and page sequence numbers closed up after the headers, CRC recomputed. Granules count
// samples at the codec's rate (Opus: 48 kHz, pre-skip included), so the decoder's trimming stays right.
import { readGranule } from '../containers/index.js';
import { oggCrc32, opusPacketSamples48, PAGE_BOS, PAGE_CONTINUED, PAGE_EOS } from '../transcode/index.js';
import { SORTED, type Group, type ReplayFormat } from './format.js';

/** One logical stream of a chained file (the transcoder starts one after each client flush). */
interface Chain {
  serial: number;
  headers: Buffer[];
  headerBytes: number;
  /** Samples a second that granules count; undefined for a codec we can't time (left as is). */
  rate?: number;
  /** Opus: each packet's duration is in its TOC, so a replay can start at any packet. */
  opus: boolean;
  /** Stream time where this chain starts (its first page with media starts there). */
  base?: number;
  lastGranule: number;
  /** Sequence number after the header pages, and after the latest page. */
  headerSeqEnd: number;
  nextSeq: number;
}

/** Where a kept page group sits in its chain. */
interface PageCtx {
  chain: Chain;
  prevGranule: number;
  seq: number;
}

interface Shift {
  chain: Chain;
  granule: number;
  seq: number;
}

/** A kept page group rebuilt to start at a packet: its pages, the granule before that packet and
 *  the sequence number of the page it is on. */
interface Trimmed {
  pages: Buffer[];
  granule: number;
  seq: number;
}

/** A packet that starts a replay sooner than this after the cut still holds it (granules are exact). */
const CUT_SLACK_SECONDS = 1e-6;

function isOpus(firstPage: Buffer): boolean {
  const body = firstPage.subarray(27 + firstPage[26]);
  return body.length >= 19 && body.toString('latin1', 0, 8) === 'OpusHead';
}

function codecRate(firstPage: Buffer): number | undefined {
  const body = firstPage.subarray(27 + firstPage[26]);
  if (isOpus(firstPage)) return 48000;
  if (body.length >= 16 && body[0] === 1 && body.toString('latin1', 1, 7) === 'vorbis')
    return body.readUInt32LE(12) || undefined;
  return undefined;
}

/** Where each Opus packet of a page group starts: its page, its first lacing segment and its start
 *  granule. A page's granule is the end of the last packet completed on it; the packets before end
 *  where the next begins (an end-of-stream page, whose granule may trim the last, is counted on from
 *  the page before). Packets that do not complete in the group are left out. */
function packetStarts(pages: Buffer[], prevGranule: number): Array<{ page: number; seg: number; granule: number }> {
  const out: Array<{ page: number; seg: number; granule: number }> = [];
  let open: { page: number; seg: number; parts: Buffer[] } | undefined;
  let before = prevGranule;
  for (let p = 0; p < pages.length; p++) {
    const page = pages[p],
      nseg = page[26],
      done: Array<{ page: number; seg: number; samples: number }> = [];
    let off = 27 + nseg;
    for (let s = 0; s < nseg; s++) {
      const len = page[27 + s];
      open ??= { page: p, seg: s, parts: [] };
      open.parts.push(page.subarray(off, off + len));
      off += len;
      if (len === 255) continue;
      const toc = open.parts[0].length >= 2 ? open.parts[0] : Buffer.concat(open.parts); // the TOC and frame count
      done.push({ page: open.page, seg: open.seg, samples: opusPacketSamples48(toc) });
      open = undefined;
    }
    const granule = readGranule(page);
    if (granule < 0 || done.length === 0) continue;
    let end = page[5] & PAGE_EOS ? before + done.reduce((n, d) => n + d.samples, 0) : granule;
    const from = out.length;
    for (let i = done.length - 1; i >= 0; i--) {
      end -= done[i].samples;
      out[from + i] = { page: done[i].page, seg: done[i].seg, granule: end };
    }
    before = granule;
  }
  return out;
}

/** The page group from the Opus packet that holds `cutGranule` (the last one starting at or before
 *  it): the page it starts on rebuilt to begin with it, the pages after as they are. Undefined when
 *  that is the group's first packet (nothing to leave out) or the packets can't be read. */
function fromPacket(g: Group<PageCtx>, cutGranule: number): Trimmed | undefined {
  let starts: ReturnType<typeof packetStarts>;
  const units = g.units;
  try {
    starts = packetStarts(units, g.ctx.prevGranule);
  } catch {
    return undefined;
  }
  let k = -1;
  while (k + 1 < starts.length && starts[k + 1].granule <= cutGranule) k++;
  if (k <= 0) return undefined;
  const { page: p, seg, granule } = starts[k];
  const page = units[p],
    nseg = page[26];
  let skip = 0;
  for (let s = 0; s < seg; s++) skip += page[27 + s];
  const head = Buffer.from(page.subarray(0, 27));
  head[5] &= ~PAGE_CONTINUED;
  head[26] = nseg - seg;
  const rebuilt = Buffer.concat([head, page.subarray(27 + seg, 27 + nseg), page.subarray(27 + nseg + skip)]);
  rebuilt.writeUInt32LE(0, 22);
  rebuilt.writeUInt32LE(oggCrc32(rebuilt), 22);
  return { pages: [rebuilt, ...units.slice(p + 1)], granule, seq: page.readUInt32LE(18) };
}

/** The page with granule and sequence lowered, CRC recomputed. */
function shiftPage(page: Buffer, s: Shift): Buffer {
  if (s.granule === 0 && s.seq === 0) return page;
  const out = Buffer.from(page);
  const g = readGranule(out);
  if (g >= 0) {
    const v = g > s.granule ? g - s.granule : 0;
    out.writeUInt32LE(v % 0x1_0000_0000, 6);
    out.writeUInt32LE(Math.floor(v / 0x1_0000_0000), 10);
  }
  out.writeUInt32LE((out.readUInt32LE(18) - s.seq) >>> 0, 18);
  out.writeUInt32LE(0, 22);
  out.writeUInt32LE(oggCrc32(out), 22);
  return out;
}

/** A chain its BOS page starts: no headers kept yet. */
function newChain(bos: Buffer, serial: number): Chain {
  return {
    serial,
    headers: [],
    headerBytes: 0,
    rate: codecRate(bos),
    opus: isOpus(bos),
    lastGranule: 0,
    headerSeqEnd: 0,
    nextSeq: 0,
  };
}

export function oggFormat(): ReplayFormat<PageCtx> {
  let chains: Chain[] = [];
  let shift: Shift | undefined;
  const latest = () => chains[chains.length - 1] as Chain | undefined;

  /** Header page of the latest chain (a BOS page starts a new one). */
  function header(page: Buffer, serial: number): boolean {
    if (page[5] & PAGE_BOS) chains.push(newChain(page, serial));
    const c = latest();
    if (!c || c.serial !== serial) return false;
    c.headers.push(page);
    c.headerBytes += page.length;
    c.headerSeqEnd = c.nextSeq = page.readUInt32LE(18) + 1;
    return true;
  }

  return {
    sort(u) {
      const page = u.bytes,
        serial = page.readUInt32LE(14);
      if (u.header) return header(page, serial) ? SORTED.init : SORTED.skip;
      const c = latest();
      if (!c || c.serial !== serial) return SORTED.skip; // another multiplexed stream
      if (u.start !== undefined) c.base ??= u.start;
      const prevGranule = c.lastGranule,
        seq = page.readUInt32LE(18);
      const granule = readGranule(page);
      if (granule >= 0) c.lastGranule = granule;
      c.nextSeq = seq + 1;
      if (!(page[5] & PAGE_CONTINUED)) return { kind: 'open', ctx: { chain: c, prevGranule, seq } };
      return SORTED.join;
    },
    render(groups, lastEnd, cut) {
      const first = groups[0]?.ctx,
        c0 = first?.chain ?? latest();
      if (!c0) {
        shift = undefined;
        return { init: [], media: [], offset: lastEnd };
      }
      const trimmed =
        first && c0.opus && c0.base !== undefined
          ? fromPacket(groups[0], (cut - c0.base + CUT_SLACK_SECONDS) * 48000)
          : undefined;
      const granule = c0.rate === undefined ? 0 : (trimmed?.granule ?? first?.prevGranule ?? c0.lastGranule);
      shift = { chain: c0, granule, seq: (trimmed?.seq ?? first?.seq ?? c0.nextSeq) - c0.headerSeqEnd };
      const media: Buffer[] = [];
      let current = c0;
      for (const [i, g] of groups.entries()) {
        if (g.ctx.chain !== current) {
          current = g.ctx.chain;
          media.push(...current.headers);
        }
        for (const b of i === 0 && trimmed ? trimmed.pages : g.units)
          media.push(current === c0 ? shiftPage(b, shift) : b);
      }
      const base = c0.base ?? lastEnd;
      const offset = c0.rate === undefined ? (groups[0]?.start ?? lastEnd) : base + granule / c0.rate;
      return { init: c0.headers, media, offset };
    },
    rewrite(u) {
      const c = latest();
      if (!shift || u.header || c !== shift.chain || u.bytes.readUInt32LE(14) !== c.serial) return u;
      return { ...u, bytes: shiftPage(u.bytes, shift) };
    },
    forget(oldest) {
      const keep = oldest?.ctx.chain ?? latest();
      chains = chains.slice(Math.max(0, chains.indexOf(keep as Chain)));
    },
    get initBytes() {
      return chains.reduce((n, c) => n + c.headerBytes, 0);
    },
  };
}
