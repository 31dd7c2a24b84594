// One session's transcript faults (types.ts, FaultSwitches: stopTranscribing, interimsOnly,
// dropFinals): what it keeps from the client, at the session's own media time. A fault from media
// T keeps every transcript of media past T: the segment ending at T is still sent, the next is not. Which sessions a
// fault reaches is the TranscriptFaultBoard's decision (transcript-faults.ts).
import type { SessionRecord } from './session-record.js';
import type { MediaRange, TranscriptFaultCounts } from './types.js';

const EPSILON = 1e-6;

export class TranscriptGate {
  /** Media seconds past which nothing is transcribed (stopTranscribing), or null. */
  private stopFrom: number | null = null;
  /** Media seconds past which no final is sent (interimsOnly), or null. */
  private finalsFrom: number | null = null;
  private dropRanges: readonly MediaRange[] = [];
  private stopCounted = false;
  private finalsCounted = false;
  /** The session's media seconds so far. */
  media = 0;

  constructor(
    private readonly record: SessionRecord,
    private readonly counts: TranscriptFaultCounts,
  ) {}

  stopTranscribing(from: number | null): void {
    this.stopFrom = from;
    this.stopCounted = false;
    this.reached(this.media);
  }

  interimsOnly(from: number | null): void {
    this.finalsFrom = from;
    this.finalsCounted = false;
    this.reached(this.media);
  }

  dropFinals(ranges: readonly MediaRange[] | null): void {
    this.dropRanges = ranges ?? [];
  }

  /** The session's media reached `media` seconds: a fault due by then is counted. */
  reached(media: number): void {
    this.media = media;
    if (!this.stopCounted && this.stopFrom !== null && media + EPSILON >= this.stopFrom) {
      this.stopCounted = true;
      this.record.stoppedTranscribingAt ??= this.stopFrom;
      this.counts.stoppedSessions++;
    }
    if (!this.finalsCounted && this.finalsFrom !== null && media + EPSILON >= this.finalsFrom) {
      this.finalsCounted = true;
      this.counts.interimsOnlySessions++;
    }
  }

  /** Whether the final of [start, end) (and a command riding with it) is sent. */
  final(start: number, end: number): boolean {
    if (past(end, this.stopFrom)) return this.withhold();
    if (past(end, this.finalsFrom)) {
      this.counts.withheldFinals++;
      return this.withhold();
    }
    if (this.dropRanges.some(([from, to]) => start < to - EPSILON && end > from + EPSILON)) {
      this.counts.droppedFinals++;
      return this.withhold();
    }
    return true;
  }

  /** Whether an interim result of media up to `end` is sent. */
  interim(end: number): boolean {
    return past(end, this.stopFrom) ? this.withhold() : true;
  }

  private withhold(): false {
    this.record.withheldTranscripts++;
    return false;
  }
}

/** Media up to `end` goes past the point `from` (null: none). */
const past = (end: number, from: number | null) => from !== null && end > from + EPSILON;
