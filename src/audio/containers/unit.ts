// What every container parser yields: consecutive slices of its input, in order, each tagged with
// what the re-chunker and the transcoder need to know.

export interface Unit {
  /** The exact input bytes (their concatenation over all units equals the input). */
  bytes: Buffer;
  /** Part of the headers that the first upstream frame must carry in full. */
  header: boolean;
  /** Media time (seconds, stream time) this unit covers, when it carries media. */
  start?: number;
  end?: number;
  /** Codec payload inside the unit, for the transcoder (PCM bytes or whole Opus packets). */
  payload?: Buffer[];
  /** Where the unit starts in the parser's input (bytes): set on a WebM Cluster's head and an Ogg
   *  page, where a stream may be taken up again. */
  at?: number;
}

/** Each Opus packet a parser finds in a stream it passes through, for the speech detector: `bytes`
 *  holds it at [offset, offset + length), covering [start, start + duration) seconds of the stream.
 *  Called while the parser reads; the bytes are the parser's (not to be kept). */
export type PacketSink = (bytes: Buffer, offset: number, length: number, start: number, duration: number) => void;

export interface TrackInfo {
  /** 'opus' | 'vorbis' | 'pcm-f32' | 'pcm-s16' | 'aac' | 'mp3' | 'flac', or the container's own codec id. */
  codec: string;
  sampleRate?: number;
  channels?: number;
  /** Opus: pre-skip samples at 48 kHz (from OpusHead/dOps). */
  preSkip?: number;
  inputSampleRate?: number;
}

export interface ContainerParser {
  /** Units complete so far; throws MalformedAudio on bytes the container can't hold. */
  push(chunk: Buffer): Unit[];
  /** Input pauses here (client flush/end), more may follow: units complete as far as can be told
   * (FLAC's last frame, which otherwise waits for the next frame's header). */
  pause?(): Unit[];
  /** The bytes that follow may not continue the ones before (a client came back; bytes sent just
   * before it dropped may be lost): input is dropped up to the next boundary the parser can verify,
   * nothing when the bytes do continue. Returns the units complete before the gap that it held. */
  gap(expect?: Continuation['expect']): Unit[];
  /** Input bytes dropped after gaps so far. */
  readonly gapBytes: number;
  /** Bytes that bring a parser of the same stream that has read only its headers to where this one
   * is, so that the rest of the stream (continued from here, without headers) parses as it would
   * here: another replica takes the session over. Undefined where the container needs none (an Ogg
   * stream goes on at a page) or the position is not known. */
  continuation?(): Continuation | undefined;
  /** Codec and format, once the headers say. */
  readonly info: TrackInfo | undefined;
  readonly bufferedBytes: number;
}

/** See ContainerParser.continuation. `expect`: where the next media unit starts (s, ± `within`) if
 *  the bytes that follow do continue; gap(expect) skips to a boundary when the first one does not. */
export interface Continuation {
  bytes: Buffer;
  expect?: { at: number; within: number };
}

export class MalformedAudio extends Error {}

/** Throws MalformedAudio unless `b` holds the `n` bytes its fields need; `what` names it. */
export function needBytes(b: Buffer, n: number, what: string): void {
  if (b.length < n) throw new MalformedAudio(`${what} has ${b.length} bytes; its fields need ${n}`);
}

/** Runs a parser's step until it needs more bytes, collecting the units it completes (a step may
 * consume bytes that complete no unit: it then returns an empty array, and the loop goes on). */
export function collectUnits(step: () => Unit | Unit[] | undefined): Unit[] {
  const out: Unit[] = [];
  for (let u = step(); u; u = step()) {
    if (Array.isArray(u)) out.push(...u);
    else out.push(u);
  }
  return out;
}
