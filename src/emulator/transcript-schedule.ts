// What a configured session derives from media time: numbered one-second transcript segments of the
// windows that hold speech (and the remainder at a flush or the end, if it does; segment-windows.ts),
// /transcribe's interim results while speech is heard and its first declared command at the
// 5-second mark, and /streams' facts at the marks of its factGenerationInterval (media time, speech
// or not). The transcript faults' gate decides what of it reaches the client.
import { SPEECH_DEFAULTS } from '../audio/index.js';
import type { Endpoint } from '../protocol/index.js';
import { nextFactMark } from './fact-schedule.js';
import { commandMessage, factsMessage, streamsTranscript, transcribeTranscript } from './messages.js';
import type { ReceivedSpeech } from './received-speech.js';
import { SegmentWindows } from './segment-windows.js';
import type { TranscriptGate } from './transcript-gate.js';

const EPSILON = 1e-6;

type Mode = { type?: string; factGenerationInterval?: string } | undefined;

export interface ScheduleParts {
  /** queues a message for the client */
  send: (msg: unknown) => void;
  now: () => number;
  speech: ReceivedSpeech;
  gate: TranscriptGate;
}

export class TranscriptSchedule {
  private segments = 0;
  private lastInterimAt = 0;
  private commandSent = false;
  private readonly factsMode: boolean;
  private nextFact = Infinity;
  private facts = 0;
  private readonly windows: SegmentWindows;

  /** `resolved`: the configuration the session accepted. */
  constructor(
    private endpoint: Endpoint,
    private resolved: Record<string, unknown>,
    private parts: ScheduleParts,
  ) {
    const mode = resolved.mode as Mode;
    this.factsMode = endpoint === 'streams' && mode?.type === 'facts';
    if (this.factsMode) this.nextFact = nextFactMark(mode?.factGenerationInterval, 0);
    this.windows = new SegmentWindows(
      (from, to) => parts.speech.holds(from, to),
      SPEECH_DEFAULTS.onsetSeconds,
      (start, end, speech) => this.closed(start, end, speech),
    );
  }

  /** Media reached `media` seconds: the windows it completed, and an interim result if asked for. */
  mediaReached(media: number): void {
    this.windows.reached(media);
    if (this.endpoint === 'transcribe' && this.resolved.interimResults === true) this.interim(media);
  }

  /** A flush or the end: the windows up to `media` seconds, and a fact in facts mode. */
  flushUpTo(media: number): void {
    this.windows.flush(media);
    if (this.factsMode) this.fact(this.windows.start);
  }

  private closed(start: number, end: number, speech: boolean): void {
    if (speech) this.segment(start, end);
    this.parts.speech.forgetBefore(end);
    while (this.factsMode && end >= this.nextFact) {
      this.fact(end);
      this.nextFact = nextFactMark((this.resolved.mode as Mode)?.factGenerationInterval, this.nextFact);
    }
  }

  private segment(start: number, end: number): void {
    const n = this.segments++;
    if (!this.parts.gate.final(start, end)) return void this.maybeCommand(start, end, false);
    const msg =
      this.endpoint === 'transcribe'
        ? transcribeTranscript(n, start, end, true)
        : streamsTranscript(
            n,
            start,
            end,
            (this.resolved.transcription as { diarize?: boolean } | undefined)?.diarize === true,
          );
    this.parts.send(msg);
    this.maybeCommand(start, end, true);
  }

  /** An interim of the window heard so far, at most every 0.25 s of media, while it holds speech. */
  private interim(media: number): void {
    const start = this.windows.start;
    if (media <= start + EPSILON || media - this.lastInterimAt < 0.25) return;
    if (!this.parts.speech.holds(start, media)) return;
    this.lastInterimAt = media;
    if (this.parts.gate.interim(media)) this.parts.send(transcribeTranscript(this.segments, start, media, false));
  }

  /** The first declared command, once, with the segment that reaches the 5-second mark (not sent if its final is not). */
  private maybeCommand(start: number, end: number, send: boolean): void {
    if (this.commandSent || this.endpoint !== 'transcribe' || end + EPSILON < 5) return;
    const first = (this.resolved.commands as Array<{ id?: unknown; phrases?: unknown }> | undefined)?.[0];
    if (!first || typeof first.id !== 'string') return;
    this.commandSent = true;
    const phrase = Array.isArray(first.phrases) && typeof first.phrases[0] === 'string' ? first.phrases[0] : first.id;
    if (send) this.parts.send(commandMessage(first.id, phrase, start, end));
  }

  private fact(at: number): void {
    this.facts++;
    this.parts.send(factsMessage(this.facts, at, this.parts.now()));
  }
}
