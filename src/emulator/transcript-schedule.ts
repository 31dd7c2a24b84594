// What a configured session derives from media time: numbered one-second transcript segments (and
// the remainder at a flush or the end), /transcribe's interim results and its first declared command
// at the 5-second mark, and /streams' facts at the marks of its factGenerationInterval.
import type { Endpoint } from '../protocol/index.js';
import { nextFactMark } from './fact-schedule.js';
import { commandMessage, factsMessage, streamsTranscript, transcribeTranscript } from './messages.js';

const EPSILON = 1e-6;

type Mode = { type?: string; factGenerationInterval?: string } | undefined;

export class TranscriptSchedule {
  private emittedUntil = 0;
  private segments = 0;
  private lastInterimAt = 0;
  private commandSent = false;
  private readonly factsMode: boolean;
  private nextFact = Infinity;
  private facts = 0;

  /** `resolved`: the configuration the session accepted; `send` queues a message for the client. */
  constructor(
    private endpoint: Endpoint,
    private resolved: Record<string, unknown>,
    private send: (msg: unknown) => void,
    private now: () => number,
  ) {
    const mode = resolved.mode as Mode;
    this.factsMode = endpoint === 'streams' && mode?.type === 'facts';
    if (this.factsMode) this.nextFact = nextFactMark(mode?.factGenerationInterval, 0);
  }

  /** Media reached `media` seconds: the whole seconds it completed, and an interim result if asked for. */
  mediaReached(media: number): void {
    for (let next = Math.floor(this.emittedUntil + EPSILON) + 1; media + EPSILON >= next; next++) {
      this.segment(this.emittedUntil, next);
    }
    if (this.endpoint === 'transcribe' && this.resolved.interimResults === true) this.interim(media);
  }

  /** A flush or the end: the segment up to `media` seconds, and a fact in facts mode. */
  flushUpTo(media: number): void {
    if (media > this.emittedUntil + EPSILON) this.segment(this.emittedUntil, media);
    if (this.factsMode) this.fact();
  }

  private segment(start: number, end: number): void {
    const n = this.segments++;
    const msg =
      this.endpoint === 'transcribe'
        ? transcribeTranscript(n, start, end, true)
        : streamsTranscript(
            n,
            start,
            end,
            (this.resolved.transcription as { diarize?: boolean } | undefined)?.diarize === true,
          );
    this.send(msg);
    this.emittedUntil = end;
    this.maybeCommand(start, end);
    while (this.factsMode && end >= this.nextFact) {
      this.fact();
      this.nextFact = nextFactMark((this.resolved.mode as Mode)?.factGenerationInterval, this.nextFact);
    }
  }

  private interim(media: number): void {
    if (media <= this.emittedUntil + EPSILON || media - this.lastInterimAt < 0.25) return;
    this.lastInterimAt = media;
    this.send(transcribeTranscript(this.segments, this.emittedUntil, media, false));
  }

  /** The first declared command, once, in the segment that reaches the 5-second mark. */
  private maybeCommand(start: number, end: number): void {
    if (this.commandSent || this.endpoint !== 'transcribe' || end + EPSILON < 5) return;
    const first = (this.resolved.commands as Array<{ id?: unknown; phrases?: unknown }> | undefined)?.[0];
    if (!first || typeof first.id !== 'string') return;
    this.commandSent = true;
    const phrase = Array.isArray(first.phrases) && typeof first.phrases[0] === 'string' ? first.phrases[0] : first.id;
    this.send(commandMessage(first.id, phrase, start, end));
  }

  private fact(): void {
    this.facts++;
    this.send(factsMessage(this.facts, this.emittedUntil, this.now()));
  }
}
