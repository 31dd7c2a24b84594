// The media time one session received: its media clock (chosen by the first frame counted), the
// pacing check on how fast that media arrived, and where that media holds speech.
import { createMediaClock, type MediaClock } from './media-clock.js';
import { PacingCheck } from './pacing.js';
import { ReceivedSpeech } from './received-speech.js';

export class MediaTime {
  private clock: MediaClock | null = null;
  private pacing = new PacingCheck();
  readonly speech = new ReceivedSpeech();

  /** Counts one frame, arrived now: the media seconds so far, and a pacing violation's text (once). */
  add(frame: Buffer): { seconds: number; pace: string | null } {
    this.clock ??= createMediaClock(frame, (p, start, s) => this.speech.packet(p, start, s));
    const seconds = this.clock.add(frame);
    this.speech.counted(seconds);
    return { seconds, pace: this.pacing.record(seconds, Date.now()) };
  }
}
