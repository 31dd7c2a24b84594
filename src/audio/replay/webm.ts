// WebM replay: EBML header, Segment head (size made unknown: the replay is shorter), Info and Tracks,
// then the first kept Cluster from the block that holds the end of the last final (a Cluster head of
// unknown size and a Timecode of 0 made for it, its blocks moved back by that block's time), then
// whole Clusters with their Timecode lowered by the offset, in the same number of bytes. The replayed
// stream's first audio is at 0 whether the upstream times it by the timestamps or by counting the
// audio, and nothing before the packet that holds the cut is sent again.
import { children, ID, LIVE_CLUSTER, readVint, uint, type Unit, type Vint } from '../containers/index.js';
import { SORTED, type ReplayFormat } from './format.js';

/** A Cluster's Timecode (ticks of the segment's timecode scale), once its Timecode unit came. */
interface Cluster {
  ticks?: number;
}

/** The made Cluster's Timecode: 0, one byte. */
const ZERO_TIMECODE = Buffer.from([ID.Timecode, 0x81, 0x00]);
/** A block that starts this little after the cut (timestamps are rounded to ticks) still holds it. */
const CUT_SLACK = 1e-6;

/** Level-1 elements that make the initialization data; SeekHead, Cues, Void, Tags... are left out
 *  (byte positions in them would be wrong in a replay). */
const INIT = new Set([ID.EBML, ID.Segment, ID.Info, ID.Tracks]);

/** Reused for the reads of every unit sorted (read at once, never held). */
const READ: Vint = { value: 0, length: 0, unknown: false };

function elementId(b: Buffer): number | undefined {
  try {
    return readVint(b, 0, true, READ)?.value;
  } catch {
    return undefined;
  }
}

/** Where a block's relative timecode (int16) is: a SimpleBlock's after its id, size and track
 *  number; a BlockGroup's in its Block (its first child). undefined: no block. */
function blockTimeAt(b: Buffer): number | undefined {
  let off = 0;
  if (b[0] === ID.BlockGroup) {
    const group = readVint(b, 1, false, READ);
    if (!group) return undefined;
    off = 1 + group.length;
    if (b[off] !== ID.Block) return undefined;
  } else if (b[0] !== ID.SimpleBlock) return undefined;
  const size = readVint(b, off + 1, false, READ);
  if (!size) return undefined;
  const sizeEnd = off + 1 + size.length;
  const track = readVint(b, sizeEnd, false, READ);
  const at = track ? sizeEnd + track.length : b.length;
  return at + 2 <= b.length ? at : undefined;
}

/** The elements of a kept unit, a view each: the parser makes one unit of a run of blocks. A unit
 *  that is not whole elements end to end (a Cluster head of unknown size) is itself. */
function elements(b: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let off = 0;
  while (off < b.length) {
    const idLength = readVint(b, off, true, READ)?.length;
    const size = idLength === undefined ? undefined : readVint(b, off + idLength, false, READ);
    const end = size && !size.unknown ? off + idLength! + size.length + size.value : Infinity;
    if (end > b.length) return off === 0 ? [b] : [...out, b.subarray(off)];
    out.push(b.subarray(off, end));
    off = end;
  }
  return out;
}

/** The blocks of a unit (one, or a run) with their relative timecodes lowered by `ticks`, in the
 *  same bytes. */
function shiftBlocks(b: Buffer, ticks: number): Buffer {
  const parts = elements(b);
  let out: Buffer | undefined;
  let off = 0;
  for (const e of parts) {
    const at = blockTimeAt(e);
    if (at !== undefined) {
      out ??= Buffer.from(b);
      out.writeInt16BE(Math.max(-32768, e.readInt16BE(at) - ticks), off + at);
    }
    off += e.length;
  }
  return out ?? b;
}

/** The Segment head with its size rewritten as "unknown" (all ones), same length. */
function liveSegmentHead(b: Buffer): Buffer {
  const size = readVint(b, 4, false);
  if (!size) return b;
  const out = Buffer.from(b);
  out[4] = 0xff >> (size.length - 1);
  out.fill(0xff, 5, 4 + size.length);
  return out;
}

/** A Timecode element with its value lowered by `shift` ticks, written in the same bytes. */
function shiftTimecode(b: Buffer, shift: number): Buffer {
  const size = readVint(b, 1, false);
  if (!size || shift === 0) return b;
  const from = 1 + size.length,
    end = from + size.value;
  let v = Math.max(0, uint(b.subarray(from, end)) - shift);
  const out = Buffer.from(b);
  for (let i = end - 1; i >= from; i--) {
    out[i] = v % 256;
    v = Math.floor(v / 256);
  }
  return out;
}

/** The block of `units` (the elements of a Cluster whose Timecode, `ticks`, came) that holds
 *  `cutTicks`: the last one starting at or before it, else its first; its index and relative timecode. */
function blockAt(units: Buffer[], ticks: number, cutTicks: number): { index: number; rel: number } | undefined {
  let found: { index: number; rel: number } | undefined;
  for (let i = 0; i < units.length; i++) {
    const b = units[i],
      at = blockTimeAt(b);
    if (at === undefined) continue;
    const rel = b.readInt16BE(at);
    if (found && ticks + rel > cutTicks) break;
    found = { index: i, rel };
  }
  return found;
}

export function webmFormat(): ReplayFormat<Cluster> {
  const init: Buffer[] = [];
  let initBytes = 0;
  let nsPerTick = 1e6;
  let shift = 0; // ticks subtracted from Timecodes since the last render
  let lead: { ctx: Cluster; ticks: number } | undefined; // the first Cluster's blocks, moved back since the last render
  let sortedInto: Cluster | undefined; // the Cluster of the unit sorted last

  const lowered = (b: Buffer, ctx: Cluster | undefined): Buffer => {
    const id = elementId(b);
    if (id === ID.Timecode && shift !== 0) return shiftTimecode(b, shift);
    return (id === ID.SimpleBlock || id === ID.BlockGroup) && lead && ctx === lead.ctx ? shiftBlocks(b, lead.ticks) : b;
  };
  const rewrite = (u: Unit): Unit => {
    const bytes = u.header ? u.bytes : lowered(u.bytes, sortedInto);
    return bytes === u.bytes ? u : { ...u, bytes };
  };

  return {
    sort(u, open) {
      const id = elementId(u.bytes);
      if (u.header) {
        if (id === undefined || !INIT.has(id)) return SORTED.skip;
        if (id === ID.Info) {
          const head = readVint(u.bytes, 4, false);
          for (const [cid, d] of children(u.bytes.subarray(4 + (head?.length ?? 0))))
            if (cid === ID.TimecodeScale) nsPerTick = uint(d);
        }
        const bytes = id === ID.Segment ? liveSegmentHead(u.bytes) : u.bytes;
        init.push(bytes);
        initBytes += bytes.length;
        return SORTED.init;
      }
      if (id === ID.Cluster) {
        sortedInto = {};
        return { kind: 'open', ctx: sortedInto };
      }
      sortedInto = open?.ctx;
      // Level-1 ids have 4 bytes: Cues, Tags... after the clusters.
      if (id === undefined || id > 0xffffff) return SORTED.skip;
      if (id === ID.Timecode && open && open.ctx.ticks === undefined) {
        const size = readVint(u.bytes, 1, false);
        open.ctx.ticks = size ? uint(u.bytes.subarray(1 + size.length)) : 0;
      }
      return SORTED.join;
    },
    render(groups, lastEnd, cut) {
      const g0 = groups[0],
        first = g0?.ctx;
      const firstUnits = g0 ? g0.units.flatMap(elements) : [];
      const cutTicks = (cut * 1e9) / nsPerTick + (CUT_SLACK * 1e9) / nsPerTick;
      const from = first?.ticks !== undefined ? blockAt(firstUnits, first.ticks, cutTicks) : undefined;
      lead = from && from.rel !== 0 ? { ctx: first!, ticks: from.rel } : undefined;
      shift = first?.ticks !== undefined ? first.ticks + (from?.rel ?? 0) : Math.round((lastEnd * 1e9) / nsPerTick);
      const media = groups.flatMap((g, i) => (i === 0 ? firstUnits : g.units).map((b) => lowered(b, g.ctx)));
      // The first Cluster from that block on, under a head made for it (its size, if known, no longer holds).
      if (from) media.splice(0, from.index, LIVE_CLUSTER, ZERO_TIMECODE);
      return { init, media, offset: (shift * nsPerTick) / 1e9 };
    },
    rewrite,
    forget() {},
    get initBytes() {
      return initBytes;
    },
  };
}
