// What a session knows of its speech: which stretches of the audio it forwards hold speech (the
// detector, on the Opus packets as they are parsed), which of them its final transcripts cover
// (coverage.ts), and whether the current upstream session has stopped transcribing while its socket
// stays healthy (a silent stall). Stalled: STALL_SPEECH_SECONDS of speech went upstream since its
// last transcript message (interim or final, or since it became ready). A recogniser says nothing
// until an utterance ends unless it sends interim results, so the gateway always has them sent (it
// asks /transcribe for them, and keeps them from a client that did not: config.ts), and a long
// utterance keeps the watch fed. Speech counts once it has been upstream RESPONSE_GRACE_MS: a
// recogniser answers what it was just sent a moment later, and audio sent ahead of real time (a
// client's burst, a replay) is not owed a transcript yet. Silence and noise are not speech: they
// never make a stall.
import { SpeechDetector } from '../audio/index.js';
import { detectorRan } from '../telemetry/index.js';
import { Coverage, finalsEnd, type CoverageFigures, type CoverageState, type Gap } from './coverage.js';

/** What a final tells: the stall's audio is covered again, or the finals passed over speech (a gap). */
export type FinalNews = { kind: 'recovered'; start: number; end: number } | ({ kind: 'gap' } & Gap);

/** How long sent speech waits before it counts toward a stall: the recogniser's time to answer it. */
export const RESPONSE_GRACE_MS = 2000;
/** Sent-media marks kept for that wait: a few a second, for RESPONSE_GRACE_MS. */
const MAX_MARKS = 256;

export class SpeechWatch {
  readonly coverage = new Coverage();
  private readonly detector = new SpeechDetector();
  /** stretches of the detector already given to the coverage: up to this media time */
  private coveredTo = 0;
  /** sent media (stream seconds) when the current upstream session last said anything of a transcript */
  private since = 0;
  /** how far the media sent upstream reaches (stream seconds) */
  private sentTo = 0;
  /** the sent media a stall left without transcripts, until finals cover it */
  private stall?: { start: number; end: number };
  /** gaps behind a final already told */
  private gapsTold = 0;
  /** (when, sentTo) of recent sends, oldest first: what had been sent RESPONSE_GRACE_MS ago */
  private marks: Array<[number, number]> = [];
  /** sent media old enough to be owed a transcript */
  private owedTo = 0;

  /** `thresholdSeconds`: STALL_SPEECH_SECONDS (0: never a stall); `now`: the clock, in ms. */
  constructor(
    private readonly thresholdSeconds: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** An Opus packet as the parser read it (see PacketSink). */
  packet(bytes: Buffer, offset: number, length: number, start: number, duration: number): void {
    const t = performance.now();
    this.detector.packet(bytes.subarray(offset, offset + length), start, duration);
    detectorRan((performance.now() - t) / 1000);
  }

  /** A transcript message of the current upstream session, interim or final. */
  heard(): void {
    this.since = this.sentTo;
  }

  /** A new upstream session took over (or the first one started): its silence is counted from here. */
  ready(): void {
    this.since = this.sentTo;
  }

  /** A final delivered to the client spans [start, end] of its stream; what it tells, if anything. */
  final(start: number, end: number): FinalNews | undefined {
    this.syncCoverage();
    this.coverage.final(start, end);
    if (this.stall && end >= this.stall.end - 0.01) {
      const { start: from, end: to } = this.stall;
      this.stall = undefined;
      return { kind: 'recovered', start: from, end: to };
    }
    // A gap the finals passed over: uncovered speech with a final after it.
    const f = this.coverage.figures();
    const behind = f.gaps.filter((g) => g.end <= start + 0.01);
    const told = behind.length + (behind.length === f.gaps.length ? f.moreGaps : 0);
    if (told <= this.gapsTold) return undefined;
    this.gapsTold = told;
    const g = behind.at(-1);
    return g && { kind: 'gap', ...g };
  }

  /** Media up to `until` (stream seconds) went upstream; true when the upstream session has stalled. */
  sent(until: number): boolean {
    if (until > this.sentTo) this.sentTo = until;
    if (this.thresholdSeconds <= 0) return false;
    const owed = this.owed();
    if (owed <= this.since || this.detector.speechBetween(this.since, owed) < this.thresholdSeconds) return false;
    this.stall = { start: Math.round(this.since * 1000) / 1000, end: Math.round(this.sentTo * 1000) / 1000 };
    return true;
  }

  /** Speech seconds forwarded, covered by finals, and the gaps. */
  figures(): CoverageFigures {
    this.syncCoverage();
    return this.coverage.figures();
  }

  state(): CoverageState {
    this.syncCoverage();
    return this.coverage.state();
  }

  /** A session taken over: its coverage so far, from its record, whose finals the client had up to
   *  `sentTo` (where the new upstream session starts). After a crash the record may be older than
   *  that: the finals delivered since its write are taken as covering what they span (their gaps, if
   *  any, died with the owner), and the speech of that stretch counts as far as the record knew it. */
  restore(state: CoverageState | undefined, sentTo: number): void {
    this.coverage.restore(state);
    const known = finalsEnd(state);
    if (state && sentTo > known) this.coverage.final(known, sentTo);
    this.coveredTo = Math.max(this.coveredTo, state?.horizon ?? 0);
    this.sentTo = sentTo;
    this.since = sentTo;
  }

  /** How far the media sent at least RESPONSE_GRACE_MS ago reaches. */
  private owed(): number {
    const t = this.now();
    if (this.marks.length < MAX_MARKS) this.marks.push([t, this.sentTo]);
    else this.marks[this.marks.length - 1] = [t, this.sentTo];
    let i = 0;
    while (i < this.marks.length && this.marks[i][0] <= t - RESPONSE_GRACE_MS) this.owedTo = this.marks[i++][1];
    if (i > 0) this.marks.splice(0, i);
    return this.owedTo;
  }

  /** The detector's stretches since the last sync go to the coverage (the newest may still grow). */
  private syncCoverage(): void {
    for (let i = 0; i < this.detector.stretchCount; i++) {
      const end = this.detector.stretchEnd(i);
      if (end <= this.coveredTo) continue;
      this.coverage.speech(Math.max(this.detector.stretchStart(i), this.coveredTo), end);
    }
    const n = this.detector.stretchCount;
    if (n > 0) this.coveredTo = Math.max(this.coveredTo, this.detector.stretchEnd(n - 1));
  }
}
