// The media time one session received: its media clock (chosen by the first frame counted) and the
// pacing check on how fast that media arrived.
import { createMediaClock, type MediaClock } from './media-clock.js';
import { PacingCheck } from './pacing.js';

export class MediaTime {
  private clock: MediaClock | null = null;
  private pacing = new PacingCheck();

  /** Counts one frame, arrived now: the media seconds so far, and a pacing violation's text (once). */
  add(frame: Buffer): { seconds: number; pace: string | null } {
    this.clock ??= createMediaClock(frame);
    const seconds = this.clock.add(frame);
    return { seconds, pace: this.pacing.record(seconds, Date.now()) };
  }
}
