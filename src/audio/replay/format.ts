// What the replay buffer needs from a container: which units are initialization data, where a
// replay may start, and how to rewrite timestamps so a replayed stream starts at 0.
import type { Unit } from '../containers/index.js';

/** Units a replay may start at, with what the container needs to rewrite them (`ctx`). */
export interface Group<C> {
  /** The bytes of its units, a view each (the Unit objects are not kept: only bytes are replayed);
   *  made anew on every read, so read it once per use. */
  readonly units: Buffer[];
  readonly bytes: number;
  /** Media time (original stream time) the group's units cover, once one carries media. */
  start?: number;
  end?: number;
  /** Where its first unit starts in the parser's input, when the parser says (Unit.at). */
  readonly at?: number;
  readonly ctx: C;
}

/** init: kept for good; open: starts a group (a boundary); join: more of the open group (dropped
 *  if that group was dropped over the bound); skip: never replayed (e.g. an index with byte positions). */
export type Sorted<C> = { kind: 'init' } | { kind: 'open'; ctx: C } | { kind: 'join' } | { kind: 'skip' };

/** The verdicts without a context, made once (sort runs for every unit that goes upstream). */
export const SORTED = {
  init: { kind: 'init' },
  join: { kind: 'join' },
  skip: { kind: 'skip' },
} as const;

export interface ReplayFormat<C> {
  /** `open` is the newest group, undefined when there is none or it was dropped. */
  sort(u: Unit, open: Group<C> | undefined): Sorted<C>;
  /** The init data, then the groups rewritten to start at 0 (`media`, which may hold a later
   *  chain's headers); also sets how later units are rewritten. `lastEnd`: end of the latest media
   *  seen, the offset when no group is kept. `cut`: the end of the last final (stream time); a
   *  container that can (Opus in WebM or Ogg) starts the first group at the packet holding it. */
  render(groups: Group<C>[], lastEnd: number, cut: number): { init: Buffer[]; media: Buffer[]; offset: number };
  /** A unit added after the last render, as the stream that render started goes on. */
  rewrite(u: Unit): Unit;
  /** Init data no kept group needs any more may go (an older chained Ogg stream's headers). */
  forget(oldest: Group<C> | undefined): void;
  readonly initBytes: number;
}

/** MP3, FLAC, MP4, ...: no timestamps rewritten; a group is a unit with media plus the units
 *  without media just before it (an MP4 `moof` before its `mdat`). */
export function otherFormat(): ReplayFormat<null> {
  let initBytes = 0;
  const init: Buffer[] = [];
  return {
    sort(u, open) {
      if (u.header) {
        init.push(u.bytes);
        initBytes += u.bytes.length;
        return SORTED.init;
      }
      return open && open.end === undefined ? SORTED.join : { kind: 'open', ctx: null };
    },
    render(groups, lastEnd) {
      const media = groups.flatMap((g) => g.units);
      return { init, media, offset: groups[0]?.start ?? lastEnd };
    },
    rewrite: (u) => u,
    forget() {},
    get initBytes() {
      return initBytes;
    },
  };
}
