// One timeline for the client across upstream sessions. After a reconnect the new upstream session
// counts from 0 at the replay point, so every media time it reports is shifted by the offset; the
// replay re-transcribes audio the client already has text for, so those finals (and the commands
// recognised in them) are not sent again. Facts carry wall-clock times and pass as they came.
import type { Endpoint } from './endpoint.js';

/** How far past the last delivered final a repeat may end and still count as one: upstream times
 *  come rounded (to 10 ms at worst) while the offset is exact. No spoken word is this short. */
const EPSILON = 0.01;
/** Channels with a watermark of their own; any other channel value shares one more (bounded state). */
const MAX_CHANNELS = 32;
/** A final's flag is `true` (isFinal on /transcribe, final on /streams): bytes without it hold no final. */
const TRUE = Buffer.from('true');

/** A transcript message with no final in it (no `true` anywhere in its bytes): the one test of "is this
 *  a final?" that the timeline and the session's shedding of interim transcripts both use. */
export function holdsNoFinal(data: Buffer): boolean {
  return data.indexOf(TRUE) < 0;
}

export interface Timeline {
  /** Media seconds (client stream time) that the current upstream session's 0 corresponds to.
   *  Set it whenever a new upstream session starts (even to the same value): commands the client
   *  had from earlier sessions are then recognised as repeats. */
  offset: number;
  /** End of the last final transcript delivered to the client (client stream time); on /streams
   *  the earliest such end over the channels that have finals, so no channel's finals lie beyond it. */
  readonly finalUntil: number;
  /** The upstream message as the client must see it: the same bytes when offset is 0 and nothing is a
   *  duplicate (the hot path: no parse when the type is not transcript/command, nor for a transcript without a
   *  final before any replay), else a re-serialised
   *  message with every start/end shifted by offset; `undefined` when the message only repeats finals
   *  the client already has (a /streams message with several segments keeps the new ones).
   *  Never throws: a message it cannot read passes unchanged. */
  map(type: string, data: Buffer): Buffer | undefined;
  /** A session taken over from another replica: the client already has every final (and command) up
   *  to `seconds` on every channel. */
  restore(seconds: number): void;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
/** Microseconds: enough for any media time, and 2.1 + 0.2 reads 2.3 on the client, not 2.3000000000000003. */
const round = (t: number) => Math.round(t * 1e6) / 1e6;

/** Shifts span.start/end by offset in place; the span's end in client time, if it has one. */
function shiftSpan(span: Json, offset: number): number | undefined {
  if (offset !== 0) {
    if (isTime(span.start)) span.start = round(span.start + offset);
    if (isTime(span.end)) span.end = round(span.end + offset);
  }
  return isTime(span.end) ? span.end : undefined;
}

/** /streams segments keep a watermark per channel: with several channels, finals may overlap in time. */
function channelOf(segment: Json): number {
  const channel = isObject(segment.participant) ? segment.participant.channel : 0;
  return typeof channel === 'number' && Number.isInteger(channel) && channel >= 0 && channel < MAX_CHANNELS
    ? channel
    : MAX_CHANNELS;
}

class SessionTimeline implements Timeline {
  #offset = 0;
  /** A new upstream session has started with a replay: from then on its transcripts may repeat. */
  #replayed = false;
  /** End of the last delivered final, per channel (/transcribe: channel 0 only). */
  readonly #finals = new Map<number, number>();
  /** The least of #finals (0 while there are none): read after every transcript, changed only by a final. */
  #finalsLeast = 0;
  /** Finals the client had before this replica took the session over (every channel). */
  #floor = -Infinity;
  /** End of the last command delivered in this upstream session, and in the ones before it. */
  #commandsNow = -Infinity;
  #commandsBefore = -Infinity;

  constructor(
    private readonly endpoint: Endpoint,
    private readonly onFinal?: FinalSpan,
  ) {}

  get offset(): number {
    return this.#offset;
  }

  set offset(seconds: number) {
    if (!isTime(seconds) || seconds < 0)
      throw new RangeError(`timeline offset must be a finite number of seconds >= 0, got ${seconds}`);
    this.#offset = seconds;
    this.#replayed = true;
    this.#commandsBefore = Math.max(this.#commandsBefore, this.#commandsNow);
  }

  get finalUntil(): number {
    return Math.max(this.#floor, this.#finalsLeast);
  }

  restore(seconds: number): void {
    this.#floor = seconds;
    this.#commandsBefore = Math.max(this.#commandsBefore, seconds);
  }

  map(type: string, data: Buffer): Buffer | undefined {
    if (type !== 'transcript' && type !== 'command') return data;
    // Before any replay nothing is a repeat, and a transcript with no final moves no watermark: it goes
    // as it came, unparsed (most transcripts are interim).
    if (type === 'transcript' && !this.#replayed && holdsNoFinal(data)) return data;
    try {
      const msg: unknown = JSON.parse(data.toString('utf8'));
      if (!isObject(msg)) return data;
      if (type === 'command') return this.#command(msg, data);
      return this.endpoint === 'transcribe' ? this.#transcript(msg, data) : this.#segments(msg, data);
    } catch {
      return data; // unreadable or absurdly nested: the client gets it as the upstream sent it
    }
  }

  #isRepeat(channel: number, end: number): boolean {
    const until = Math.max(this.#finals.get(channel) ?? -Infinity, this.#floor);
    return end <= until + EPSILON;
  }

  #delivered(channel: number, end: number): void {
    this.#finals.set(channel, Math.max(end, this.#finals.get(channel) ?? -Infinity));
    this.#finalsLeast = Math.min(...this.#finals.values());
  }

  /** The message to send when nothing was dropped: the original bytes unless times moved. */
  #out(msg: Json, data: Buffer): Buffer {
    return this.#offset === 0 ? data : Buffer.from(JSON.stringify(msg));
  }

  /** /transcribe: {"type":"transcript","data":{"text",...,"start","end","isFinal"}} */
  #transcript(msg: Json, data: Buffer): Buffer | undefined {
    if (!isObject(msg.data)) return data;
    const end = shiftSpan(msg.data, this.#offset);
    if (end === undefined) return this.#out(msg, data);
    if (this.#isRepeat(0, end)) return undefined;
    if (msg.data.isFinal === true) {
      this.#delivered(0, end);
      if (isTime(msg.data.start)) this.onFinal?.(msg.data.start, end);
    }
    return this.#out(msg, data);
  }

  /** {"type":"command","data":{"id",...,"start","end"}}: it may come after the final it was recognised in,
   *  with that final's span (the emulator's do), so only a command that an earlier upstream session
   *  already delivered up to its end is a repeat; within one session none is dropped. */
  #command(msg: Json, data: Buffer): Buffer | undefined {
    if (!isObject(msg.data)) return data;
    const end = shiftSpan(msg.data, this.#offset);
    if (end === undefined) return this.#out(msg, data);
    if (end <= this.#commandsBefore + EPSILON) return undefined;
    this.#commandsNow = Math.max(this.#commandsNow, end);
    return this.#out(msg, data);
  }

  /** /streams: {"type":"transcript","data":[{"id",...,"final","participant":{"channel"},"time":{"start","end"}}]}.
   *  Segments are judged against the watermarks as the message found them: one message never repeats itself. */
  #segments(msg: Json, data: Buffer): Buffer | undefined {
    if (!Array.isArray(msg.data)) return data;
    const kept: unknown[] = [];
    const finals: Array<[channel: number, end: number]> = [];
    for (const segment of msg.data as unknown[]) {
      if (!isObject(segment) || !isObject(segment.time)) {
        kept.push(segment);
        continue;
      }
      const end = shiftSpan(segment.time, this.#offset);
      const channel = channelOf(segment);
      if (end !== undefined && this.#isRepeat(channel, end)) continue;
      kept.push(segment);
      if (end !== undefined && segment.final === true) {
        finals.push([channel, end]);
        if (isTime(segment.time.start)) this.onFinal?.(segment.time.start, end);
      }
    }
    for (const [channel, end] of finals) this.#delivered(channel, end);
    if (kept.length === msg.data.length) return this.#out(msg, data);
    if (kept.length === 0) return undefined;
    return Buffer.from(JSON.stringify({ ...msg, data: kept }));
  }
}

/** Told the span of each final the client is given, on its timeline. */
export type FinalSpan = (start: number, end: number) => void;

export function createTimeline(endpoint: Endpoint, onFinal?: FinalSpan): Timeline {
  return new SessionTimeline(endpoint, onFinal);
}
