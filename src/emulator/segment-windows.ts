// The windows of media a session's segments are cut from: each whole second of media (the first
// after a flush runs to the next whole second), and the remainder at a flush or the end. A window
// is closed with its verdict, speech or not. One that holds speech is closed as soon as media
// reaches its end; one that seems silent waits until the detector's onset has passed its end, as
// speech starting in its last moments is only known then (a recogniser would give those words a
// segment too). A flush or the end decides the waiting window at once, with what is known, and
// always gives the remainder its segment: a recogniser asked to finalise says what it holds, and
// clients count on finals reaching the end of their audio.

const EPSILON = 1e-6;
/** A window shorter than this (the first after a flush) is not judged: too little for the detector
 *  to tell, it gets its segment, so a client's finals never stop just after its flush. */
const MIN_JUDGED_SECONDS = 0.5;

/** A window closed: [start, end) of media, and whether it holds speech. */
export type WindowClosed = (start: number, end: number, speech: boolean) => void;

export class SegmentWindows {
  /** Where the window being heard starts. */
  start = 0;
  private waiting: { start: number; end: number } | null = null;

  constructor(
    private readonly holdsSpeech: (from: number, to: number) => boolean,
    /** Media seconds after a silent-looking window's end before it is closed as silent. */
    private readonly lookahead: number,
    private readonly closed: WindowClosed,
  ) {}

  /** Media reached `media` seconds: the windows it completed, closed (or waiting, if they seem silent). */
  reached(media: number): void {
    for (;;) {
      this.settle(media, false);
      const end = Math.floor(this.start + EPSILON) + 1;
      if (media + EPSILON < end) return;
      const start = this.start;
      this.start = end;
      if (end - start < MIN_JUDGED_SECONDS || this.holdsSpeech(start, end)) this.closed(start, end, true);
      else this.waiting = { start, end };
    }
  }

  /** A flush or the end at `media` seconds: every window up to it closed now, the remainder too. */
  flush(media: number): void {
    this.settle(media, true);
    if (media <= this.start + EPSILON) return;
    const start = this.start;
    this.start = media;
    this.closed(start, media, true);
  }

  private settle(media: number, now: boolean): void {
    const w = this.waiting;
    if (!w || (!now && media + EPSILON < w.end + this.lookahead)) return;
    this.waiting = null;
    this.closed(w.start, w.end, this.holdsSpeech(w.start, w.end));
  }
}
