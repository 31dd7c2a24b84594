// The audio a new upstream session needs after the old one was lost: the container's
// initialization data and the media no final transcript covers yet, from the Opus packet that holds
// the last final's end (WebM, Ogg; other containers: from a container boundary), with container
// timestamps rewritten so the replayed stream starts at 0.
//
// Limits: MP3, FLAC and MP4 ('other') are replayed as they are (no timestamps rewritten; offset is
// the first kept unit's start). Opus decoders drop the pre-skip (~6.5 ms) at the start of the replay.
// A group (Cluster, page, unit) bigger than maxBytes is dropped whole with what follows of it.
// The init data is never dropped (the pipeline bounds headers before any unit comes here).
import { UPSTREAM_MAX_FRAME_BYTES } from '../protocol/index.js';
import type { Unit } from './containers/index.js';
import { KeptGroup, oggFormat, otherFormat, webmFormat, type ReplayFormat } from './replay/index.js';

export interface ReplayBuffer {
  /** Every unit sent upstream, in order. Header units are kept for good; media units until released.
   *  Returns the unit as it goes upstream now: itself until the first replay(), then rewritten to
   *  continue the replayed stream (Cluster Timecodes, Ogg granules and page numbers). Everything
   *  added before replay() is in the replay: anything still queued behind add() must not be sent. */
  add(unit: Unit): Unit;
  /** A final transcript covers media up to `seconds` (stream time, as the units' start/end): drop
   *  the groups (whole Clusters, pages, units) that the next group starts at or before it: a group's
   *  own end may be an estimate (a WebM block without a duration). The newest group stays: more of
   *  it may still come, and a replay needs its boundary. */
  release(seconds: number): void;
  /** What a new upstream session gets: initialization data, then the kept audio from the packet
   *  holding the released time (WebM, Ogg/Opus; else from a container boundary), with container
   *  timestamps rewritten so the replayed stream starts at 0; `offset` is the media time (seconds,
   *  original stream time) that the new stream's 0 corresponds to. The first frame holds the whole
   *  initialization data; frames are cut at unit boundaries. */
  replay(): { frames: Buffer[]; offset: number; bytes: number };
  /** Where the client's stream could be taken up again with nothing the finals lack missing: the
   *  parser-input offset of the oldest kept group (a Cluster, a page), and the media seconds from
   *  its start to the newest media. Undefined when the parser did not say where it starts. */
  resumePoint(): { at: number; behind: number } | undefined;
  /** Bytes held (bounded by maxBytes: past it the oldest media is dropped and counted in `droppedBytes`). */
  readonly bufferedBytes: number;
  readonly droppedBytes: number;
}

export type ReplayKind = 'webm' | 'ogg' | 'other';

export interface ReplayOptions {
  maxBytes: number;
  /** Largest replay frame (default 64000, the pipeline's upstream frame bound); a bigger unit goes alone. */
  maxFrameBytes?: number;
}

/** Units → frames of at most `max` bytes, cut between units; the init data stays whole in the first. */
function frames(init: Buffer[], media: Buffer[], max: number): Buffer[] {
  const out: Buffer[] = [];
  let cur = [...init],
    bytes = cur.reduce((n, b) => n + b.length, 0);
  for (const u of media) {
    if (bytes > 0 && bytes + u.length > max) {
      out.push(Buffer.concat(cur, bytes));
      cur = [];
      bytes = 0;
    }
    cur.push(u);
    bytes += u.length;
  }
  if (bytes > 0) out.push(Buffer.concat(cur, bytes));
  return out;
}

/** Dropped groups kept to be used again: one a client piece is dropped as one is opened. */
const SPARE_GROUPS = 4;

class Buffered<C> implements ReplayBuffer {
  private groups: KeptGroup<C>[] = [];
  private spare: KeptGroup<C>[] = [];
  private open: KeptGroup<C> | undefined; // the newest group, while more of it may come
  private mediaBytes = 0;
  private lastEnd = 0;
  /** the latest released time: a replay starts at the packet that holds it */
  private cut = -Infinity;
  droppedBytes = 0;

  constructor(
    private format: ReplayFormat<C>,
    private o: ReplayOptions,
  ) {}

  get bufferedBytes(): number {
    return this.format.initBytes + this.mediaBytes;
  }

  add(unit: Unit): Unit {
    if (unit.end !== undefined) this.lastEnd = Math.max(this.lastEnd, unit.end);
    const s = this.format.sort(unit, this.open);
    if (s.kind === 'init') this.format.forget(this.groups[0]); // chained Ogg: headers no group needs
    if (s.kind === 'open') {
      this.open = this.spare.pop()?.reuse(s.ctx, unit.at) ?? new KeptGroup(s.ctx, unit.at);
      this.groups.push(this.open);
    }
    if (s.kind === 'open' || s.kind === 'join') {
      if (this.open) this.keep(this.open, unit);
      else this.droppedBytes += unit.bytes.length; // the rest of a group dropped over the bound
    }
    while (this.bufferedBytes > this.o.maxBytes && this.groups.length > 0) this.drop(true);
    return this.format.rewrite(unit);
  }

  release(seconds: number): void {
    this.cut = Math.max(this.cut, seconds);
    while (this.groups.length > 1 && (this.groups[1].start ?? Infinity) <= seconds) this.drop(false);
  }

  replay(): { frames: Buffer[]; offset: number; bytes: number } {
    const r = this.format.render(this.groups, this.lastEnd, this.cut);
    const out = frames(r.init, r.media, this.o.maxFrameBytes ?? UPSTREAM_MAX_FRAME_BYTES);
    return { frames: out, offset: r.offset, bytes: out.reduce((n, f) => n + f.length, 0) };
  }

  resumePoint(): { at: number; behind: number } | undefined {
    const g = this.groups[0];
    if (g?.at === undefined) return undefined;
    return { at: g.at, behind: Math.max(0, this.lastEnd - (g.start ?? this.lastEnd)) };
  }

  private keep(g: KeptGroup<C>, u: Unit): void {
    g.push(u.bytes);
    this.mediaBytes += u.bytes.length;
    if (u.start !== undefined) g.start = Math.min(g.start ?? u.start, u.start);
    if (u.end !== undefined) g.end = Math.max(g.end ?? u.end, u.end);
  }

  /** Drops the oldest group (over the bound: counted); what follows of it is then dropped too. */
  private drop(overBound: boolean): void {
    const g = this.groups.shift() as KeptGroup<C>;
    this.mediaBytes -= g.bytes;
    if (overBound) this.droppedBytes += g.bytes;
    if (g === this.open) this.open = undefined;
    this.format.forget(this.groups[0]);
    if (this.spare.length < SPARE_GROUPS) this.spare.push(g.clear());
  }
}

export function createReplayBuffer(kind: ReplayKind, o: ReplayOptions): ReplayBuffer {
  if (kind === 'webm') return new Buffered(webmFormat(), o);
  if (kind === 'ogg') return new Buffered(oggFormat(), o);
  return new Buffered(otherFormat(), o);
}
