// WebM replay: EBML header, Segment head (size made unknown: the replay is shorter), Info and Tracks,
// then whole Clusters with their Timecode lowered by the offset, in the same number of bytes.
import type { Unit } from '../containers/unit.js';
import { children, ID, readVint, uint } from '../containers/webm.js';
import type { ReplayFormat } from './format.js';

/** A Cluster's Timecode (ticks of the segment's timecode scale), once its Timecode unit came. */
interface Cluster { ticks?: number }

/** Level-1 elements that make the initialization data; SeekHead, Cues, Void, Tags... are left out
 *  (byte positions in them would be wrong in a replay). */
const INIT = new Set([ID.EBML, ID.Segment, ID.Info, ID.Tracks]);

function elementId(b: Buffer): number | undefined {
  try { return readVint(b, 0, true)?.value; } catch { return undefined; }
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
  const from = 1 + size.length, end = from + size.value;
  let v = Math.max(0, uint(b.subarray(from, end)) - shift);
  const out = Buffer.from(b);
  for (let i = end - 1; i >= from; i--) { out[i] = v % 256; v = Math.floor(v / 256); }
  return out;
}

export function webmFormat(): ReplayFormat<Cluster> {
  const init: Buffer[] = [];
  let initBytes = 0;
  let nsPerTick = 1e6;
  let shift = 0; // ticks subtracted from Timecodes since the last render

  const lowered = (b: Buffer): Buffer => (shift === 0 || elementId(b) !== ID.Timecode ? b : shiftTimecode(b, shift));
  const rewrite = (u: Unit): Unit => {
    const bytes = u.header ? u.bytes : lowered(u.bytes);
    return bytes === u.bytes ? u : { ...u, bytes };
  };

  return {
    sort(u, open) {
      const id = elementId(u.bytes);
      if (u.header) {
        if (id === undefined || !INIT.has(id)) return { kind: 'skip' };
        if (id === ID.Info) {
          const head = readVint(u.bytes, 4, false);
          for (const [cid, d] of children(u.bytes.subarray(4 + (head?.length ?? 0)))) if (cid === ID.TimecodeScale) nsPerTick = uint(d);
        }
        const bytes = id === ID.Segment ? liveSegmentHead(u.bytes) : u.bytes;
        init.push(bytes);
        initBytes += bytes.length;
        return { kind: 'init' };
      }
      if (id === ID.Cluster) return { kind: 'open', ctx: {} };
      // Level-1 ids have 4 bytes: Cues, Tags... after the clusters.
      if (id === undefined || id > 0xffffff) return { kind: 'skip' };
      if (id === ID.Timecode && open && open.ctx.ticks === undefined) {
        const size = readVint(u.bytes, 1, false);
        open.ctx.ticks = size ? uint(u.bytes.subarray(1 + size.length)) : 0;
      }
      return { kind: 'join' };
    },
    render(groups, lastEnd) {
      shift = groups[0]?.ctx.ticks ?? Math.round((lastEnd * 1e9) / nsPerTick);
      const media = groups.flatMap((g) => g.units.map(lowered));
      return { init, media, offset: (shift * nsPerTick) / 1e9 };
    },
    rewrite,
    forget() {},
    get initBytes() { return initBytes; },
  };
}
