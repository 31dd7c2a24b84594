// How much of a session's speech its final transcripts cover, on the client's one timeline (media
// seconds of the client's stream, across upstream sessions and replicas). Two sorted lists of merged
// intervals: the speech the gateway forwarded (its detector's stretches) and the spans of the finals
// it delivered. Gaps are the speech no final covers, joined across the silences between, reported
// when they hold at least GAP_MIN_SECONDS of speech. Bounded: intervals older than HORIZON_SECONDS
// behind the newest speech are folded into totals (finals come seconds after their speech), and at
// most MAX_GAPS gaps are listed (the rest counted).

/** A stretch of uncovered speech this long or longer is a gap. */
export const GAP_MIN_SECONDS = 2;
/** What is folded into totals: intervals ending this far behind the newest speech. */
const HORIZON_SECONDS = 300;
/** Intervals kept per list before folding early (a client whose speech flickers). */
const MAX_INTERVALS = 2048;
const MAX_GAPS = 100;
/** Finals and speech meet at rounded times: spans this close count as touching. */
const EPSILON = 0.005;
const round = (t: number) => Math.round(t * 1e3) / 1e3;

export interface Gap {
  /** media seconds of the client's stream */
  start: number;
  end: number;
  /** uncovered speech seconds in it */
  speechSeconds: number;
}

export interface CoverageFigures {
  /** seconds of the forwarded media that held speech */
  speechSeconds: number;
  /** of those, seconds a final transcript covers */
  coveredSeconds: number;
  /** uncovered speech stretches of GAP_MIN_SECONDS or more, oldest first (at most MAX_GAPS) */
  gaps: Gap[];
  /** gaps past MAX_GAPS, not listed */
  moreGaps: number;
}

/** What a session record carries of its coverage (numbers only). */
export interface CoverageState {
  /** folded: everything before `horizon` */
  horizon: number;
  speech: number;
  covered: number;
  gaps: Gap[];
  moreGaps: number;
  /** open intervals past the horizon: [start, end, start, end, ...] */
  s: number[];
  f: number[];
}

/** Where the finals of a coverage state end (0: none). */
export const finalsEnd = (c: CoverageState | undefined): number =>
  c && Array.isArray(c.f) && c.f.length > 0 ? Number(c.f[c.f.length - 1]) || 0 : (c?.horizon ?? 0);

type Span = [number, number];

/** Adds [start, end] to a sorted list of disjoint spans, merging what it touches. */
function addSpan(list: Span[], start: number, end: number): void {
  if (!(end > start)) return;
  const last = list.at(-1);
  if (!last || start > last[1] + EPSILON) return void list.push([start, end]); // the usual case: appended
  if (start >= last[0] - EPSILON) return void (last[1] = Math.max(last[1], end));
  let i = list.length - 1;
  while (i > 0 && list[i - 1][1] + EPSILON >= start) i--;
  let j = i;
  let s = start;
  let e = end;
  while (j < list.length && list[j][0] <= e + EPSILON) {
    s = Math.min(s, list[j][0]);
    e = Math.max(e, list[j][1]);
    j++;
  }
  list.splice(i, j - i, [s, e]);
}

const total = (list: Span[]) => list.reduce((sum, [s, e]) => sum + (e - s), 0);

/** The parts of `speech` that `finals` do not cover, in order. */
function uncovered(speech: Span[], finals: Span[]): Span[] {
  const out: Span[] = [];
  let j = 0;
  for (const [s0, e] of speech) {
    let s = s0;
    while (j < finals.length && finals[j][1] <= s) j++;
    for (let k = j; k < finals.length && finals[k][0] < e && s < e; k++) {
      if (finals[k][0] > s) out.push([s, finals[k][0]]);
      s = Math.max(s, finals[k][1]);
    }
    if (s < e) out.push([s, e]);
  }
  return out;
}

export class Coverage {
  private speechSpans: Span[] = [];
  private finalSpans: Span[] = [];
  private horizon = 0;
  private foldedSpeech = 0;
  private foldedCovered = 0;
  private foldedGaps: Gap[] = [];
  private moreGaps = 0;

  /** Forwarded media [start, end] held speech. */
  speech(start: number, end: number): void {
    if (end <= this.horizon) return;
    addSpan(this.speechSpans, Math.max(start, this.horizon), end);
    this.fold();
  }

  /** A final delivered to the client spans [start, end]. */
  final(start: number, end: number): void {
    if (end <= this.horizon || !Number.isFinite(start) || !Number.isFinite(end)) return;
    addSpan(this.finalSpans, Math.max(start, this.horizon), end);
    if (this.finalSpans.length > MAX_INTERVALS) this.fold(true);
  }

  /** Uncovered speech since `from` (media seconds): what a stall detector watches. */
  uncoveredSince(from: number): number {
    return uncovered(this.speechSpans, this.finalSpans).reduce(
      (sum, [s, e]) => sum + Math.max(0, e - Math.max(s, from)),
      0,
    );
  }

  figures(): CoverageFigures {
    const open = uncovered(this.speechSpans, this.finalSpans);
    const speech = total(this.speechSpans);
    const gaps = [...this.foldedGaps, ...gapsOf(open, this.finalSpans)];
    return {
      speechSeconds: round(this.foldedSpeech + speech),
      coveredSeconds: round(this.foldedCovered + speech - total(open)),
      gaps: gaps.slice(0, MAX_GAPS),
      moreGaps: this.moreGaps + Math.max(0, gaps.length - MAX_GAPS),
    };
  }

  state(): CoverageState {
    return {
      horizon: this.horizon,
      speech: this.foldedSpeech,
      covered: this.foldedCovered,
      gaps: this.foldedGaps,
      moreGaps: this.moreGaps,
      s: this.speechSpans.flat(),
      f: this.finalSpans.flat(),
    };
  }

  /** A session taken over: its coverage so far (from its record; values checked, as Redis is input). */
  restore(c: CoverageState | undefined): void {
    if (!c || ![c.horizon, c.speech, c.covered, c.moreGaps].every((n) => Number.isFinite(n) && n >= 0)) return;
    this.horizon = c.horizon;
    this.foldedSpeech = c.speech;
    this.foldedCovered = c.covered;
    this.moreGaps = c.moreGaps;
    this.foldedGaps = (Array.isArray(c.gaps) ? c.gaps : []).slice(0, MAX_GAPS).filter(isGap);
    for (const [list, flat] of [
      [this.speechSpans, c.s],
      [this.finalSpans, c.f],
    ] as const)
      if (Array.isArray(flat))
        for (let i = 0; i + 1 < flat.length && i < 2 * MAX_INTERVALS; i += 2)
          addSpan(list, Number(flat[i]), Number(flat[i + 1]));
  }

  /** Intervals far enough behind (or too many) become totals: nothing later changes them. Folded
   *  in steps of a horizon, cut at the end of a final (so no gap is split in two), never past the
   *  finals: speech may be known long before its finals come (a client that sends ahead of pacing). */
  private fold(force = false): void {
    const newest = this.speechSpans.at(-1)?.[1] ?? 0;
    const crowded = force || this.speechSpans.length > MAX_INTERVALS;
    if (!crowded && newest - this.horizon < 2 * HORIZON_SECONDS) return;
    const limit = newest - (crowded ? 1 : HORIZON_SECONDS);
    let cut = crowded ? limit : -Infinity;
    for (let i = this.finalSpans.length - 1; i >= 0; i--)
      if (this.finalSpans[i][1] <= limit) {
        cut = this.finalSpans[i][1];
        break;
      }
    if (cut <= this.horizon) return;
    const before = (list: Span[]) => list.filter(([s]) => s < cut).map(([s, e]): Span => [s, Math.min(e, cut)]);
    const speech = before(this.speechSpans);
    const finals = before(this.finalSpans);
    const open = uncovered(speech, finals);
    this.foldedSpeech += total(speech);
    this.foldedCovered += total(speech) - total(open);
    for (const g of gapsOf(open, finals))
      if (this.foldedGaps.length < MAX_GAPS) this.foldedGaps.push(g);
      else this.moreGaps++;
    const after = (list: Span[]) => list.filter(([, e]) => e > cut).map(([s, e]): Span => [Math.max(s, cut), e]);
    this.speechSpans = after(this.speechSpans);
    this.finalSpans = after(this.finalSpans);
    this.horizon = cut;
  }
}

/** Uncovered pieces joined across what lies between them unless a final lies there; those holding
 *  GAP_MIN_SECONDS of speech or more. */
function gapsOf(open: Span[], finals: Span[]): Gap[] {
  const gaps: Gap[] = [];
  let cur: Gap | undefined;
  let j = 0;
  for (const [s, e] of open) {
    while (j < finals.length && finals[j][1] <= s + EPSILON) j++;
    const finalBetween = cur !== undefined && j > 0 && finals[j - 1][0] >= cur.end - EPSILON;
    if (cur && !finalBetween) {
      cur.end = e;
      cur.speechSeconds += e - s;
    } else {
      if (cur && cur.speechSeconds >= GAP_MIN_SECONDS) gaps.push(cur);
      cur = { start: s, end: e, speechSeconds: e - s };
    }
  }
  if (cur && cur.speechSeconds >= GAP_MIN_SECONDS) gaps.push(cur);
  return gaps.map((g) => ({ start: round(g.start), end: round(g.end), speechSeconds: round(g.speechSeconds) }));
}

function isGap(g: unknown): g is Gap {
  const x = g as Gap;
  return (
    typeof x === 'object' &&
    x !== null &&
    [x.start, x.end, x.speechSeconds].every((n) => typeof n === 'number' && Number.isFinite(n))
  );
}

/** The figures of a coverage state (a record's), for a session that ends without its process: the
 *  janitor's end of a handed-over session nobody resumed. */
export function coverageOf(state: CoverageState | undefined): CoverageFigures | undefined {
  if (!state) return undefined;
  const c = new Coverage();
  c.restore(state);
  return c.figures();
}
