// Where the audio a session received holds speech, so that the emulator, like a recogniser, gives
// silence no segments. It is the gateway's own detector (src/audio/speech) over the Opus packets
// the media clock counted, not speech recognition. Media the detector cannot judge (Vorbis, MP3,
// FLAC, AAC, a malformed stream or packet) counts as speech: those streams get a segment for every
// window, as before the emulator listened.
import { SpeechDetector } from '../audio/index.js';

const EPSILON = 1e-6;
/** Unjudged ranges kept; past it the newest two merge (more media counted as speech, never less). */
const MAX_UNJUDGED = 1024;

export class ReceivedSpeech {
  private readonly detector = new SpeechDetector();
  /** Media ranges not judged, [start, end) pairs flat, oldest first, merged when they touch. */
  private unjudged: number[] = [];
  /** End of the media the detector was given as packets. */
  private packetsUntil = 0;

  /** One Opus packet of [start, start + seconds). */
  packet(p: Buffer, start: number, seconds: number): void {
    const before = this.detector.unknownSeconds;
    this.detector.packet(p, start, seconds);
    if (this.detector.unknownSeconds !== before) this.notJudged(start, start + seconds);
    this.packetsUntil = start + seconds;
  }

  /** The media counted so far reached `seconds`: what no packet covered was not judged. */
  counted(seconds: number): void {
    if (seconds > this.packetsUntil + EPSILON) this.notJudged(this.packetsUntil, seconds);
    this.packetsUntil = Math.max(this.packetsUntil, seconds);
  }

  /** Whether [from, to) holds any speech, or media the detector could not judge. */
  holds(from: number, to: number): boolean {
    const u = this.unjudged;
    for (let i = 0; i < u.length; i += 2) if (u[i] < to - EPSILON && u[i + 1] > from + EPSILON) return true;
    return this.detector.speechBetween(from, to) > 0;
  }

  /** Forgets the unjudged ranges that end before `t` (windows before it are decided). */
  forgetBefore(t: number): void {
    let n = 0;
    while (n < this.unjudged.length && this.unjudged[n + 1] <= t) n += 2;
    if (n > 0) this.unjudged.splice(0, n);
  }

  private notJudged(start: number, end: number): void {
    const u = this.unjudged;
    if (u.length > 0 && start <= u[u.length - 1] + EPSILON) {
      u[u.length - 1] = Math.max(u[u.length - 1], end);
      return;
    }
    if (u.length >= MAX_UNJUDGED * 2) {
      u[u.length - 1] = end;
      return;
    }
    u.push(start, end);
  }
}
