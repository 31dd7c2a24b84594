// Ogg replay: the chain's header pages (OpusHead/OpusTags, or Vorbis's three), then whole pages
// from one that starts a packet, granule positions lowered by the granule before the first kept page
// and page sequence numbers closed up after the headers, CRC recomputed. Granules count samples at
// the codec's rate (Opus: 48 kHz, pre-skip included), so the decoder's trimming stays right.
import { readGranule } from '../containers/ogg.js';
import { oggCrc32, PAGE_BOS, PAGE_CONTINUED } from '../transcode/ogg-page.js';
import { SORTED, type ReplayFormat } from './format.js';

/** One logical stream of a chained file (the transcoder starts one after each client flush). */
interface Chain {
  serial: number;
  headers: Buffer[];
  headerBytes: number;
  /** Samples a second that granules count; undefined for a codec we can't time (left as is). */
  rate?: number;
  /** Stream time where this chain starts (its first page with media starts there). */
  base?: number;
  lastGranule: number;
  /** Sequence number after the header pages, and after the latest page. */
  headerSeqEnd: number;
  nextSeq: number;
}

/** Where a kept page group sits in its chain. */
interface PageCtx { chain: Chain; prevGranule: number; seq: number }

interface Shift { chain: Chain; granule: number; seq: number }

function codecRate(firstPage: Buffer): number | undefined {
  const body = firstPage.subarray(27 + firstPage[26]);
  if (body.length >= 19 && body.toString('latin1', 0, 8) === 'OpusHead') return 48000;
  if (body.length >= 16 && body[0] === 1 && body.toString('latin1', 1, 7) === 'vorbis') return body.readUInt32LE(12) || undefined;
  return undefined;
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

export function oggFormat(): ReplayFormat<PageCtx> {
  let chains: Chain[] = [];
  let shift: Shift | undefined;
  const latest = () => chains[chains.length - 1] as Chain | undefined;

  /** Header page of the latest chain (a BOS page starts a new one). */
  function header(page: Buffer, serial: number): boolean {
    if (page[5] & PAGE_BOS) {
      chains.push({ serial, headers: [], headerBytes: 0, rate: codecRate(page), lastGranule: 0, headerSeqEnd: 0, nextSeq: 0 });
    }
    const c = latest();
    if (!c || c.serial !== serial) return false;
    c.headers.push(page);
    c.headerBytes += page.length;
    c.headerSeqEnd = c.nextSeq = page.readUInt32LE(18) + 1;
    return true;
  }

  return {
    sort(u) {
      const page = u.bytes, serial = page.readUInt32LE(14);
      if (u.header) return header(page, serial) ? SORTED.init : SORTED.skip;
      const c = latest();
      if (!c || c.serial !== serial) return SORTED.skip; // another multiplexed stream
      if (u.start !== undefined) c.base ??= u.start;
      const prevGranule = c.lastGranule, seq = page.readUInt32LE(18);
      const granule = readGranule(page);
      if (granule >= 0) c.lastGranule = granule;
      c.nextSeq = seq + 1;
      if (!(page[5] & PAGE_CONTINUED)) return { kind: 'open', ctx: { chain: c, prevGranule, seq } };
      return SORTED.join;
    },
    render(groups, lastEnd) {
      const first = groups[0]?.ctx, c0 = first?.chain ?? latest();
      if (!c0) { shift = undefined; return { init: [], media: [], offset: lastEnd }; }
      const granule = c0.rate === undefined ? 0 : first?.prevGranule ?? c0.lastGranule;
      shift = { chain: c0, granule, seq: (first?.seq ?? c0.nextSeq) - c0.headerSeqEnd };
      const media: Buffer[] = [];
      let current = c0;
      for (const g of groups) {
        if (g.ctx.chain !== current) { current = g.ctx.chain; media.push(...current.headers); }
        for (const b of g.units) media.push(current === c0 ? shiftPage(b, shift) : b);
      }
      const base = c0.base ?? lastEnd;
      const offset = c0.rate === undefined ? groups[0]?.start ?? lastEnd : base + granule / c0.rate;
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
    get initBytes() { return chains.reduce((n, c) => n + c.headerBytes, 0); },
  };
}
