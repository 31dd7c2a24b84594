// Public types of the audio pipeline (re-exported by index.ts).
import type { GatewayError } from '../protocol/index.js';
import type { Continuation, PacketSink, PcmDeclaration, Unit } from './containers/index.js';

export type { PcmDeclaration };

export type SourceKind =
  | 'webm-opus'
  | 'webm-vorbis'
  | 'webm-pcm'
  | 'ogg-opus'
  | 'ogg-vorbis'
  | 'wav'
  | 'flac'
  | 'mp3'
  | 'mp4-aac'
  | 'mp4-opus'
  | 'mp4-mp3'
  | 'pcm';

export interface AudioPlan {
  declared?: string;
  mode: 'passthrough' | 'transcode' | 'detect';
  upstreamAudioFormat?: string;
  pcm?: PcmDeclaration;
  /** Source kinds the declaration admits; undefined: anything recognisable (undeclared). */
  expect?: SourceKind[];
}

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(h: unknown): void;
}

export interface AudioPipelineOptions {
  plan: AudioPlan;
  chunkMs: number;
  pace: number;
  maxBufferedBytes: number;
  maxFrameBytes?: number;
  onFrame(frame: Buffer): void;
  /** Each upstream-bound container unit before re-chunking, and the container it belongs to; returns
   *  the unit as it goes upstream (after a reconnection's replay, retimed to continue it). */
  onUnit?(unit: Unit, kind: 'webm' | 'ogg' | 'other'): Unit;
  /** Each Opus packet of a WebM or Ogg stream, as the parser reads it (the speech detector). */
  onPacket?: PacketSink;
  onError(err: GatewayError): void;
  clock?: Clock;
}

export interface AudioStats {
  bytesIn: number;
  bytesOut: number;
  mediaSecondsIn: number;
  mediaSecondsOut: number;
  /** where the output reached on the stream's own time (seconds): the end of the last frame out */
  outUntil: number;
  framesIn: number;
  framesOut: number;
  /** Output frames cut inside one container unit (page/block/box larger than maxFrameBytes). */
  framesSplit: number;
  /** Output frames that carry more than one container unit. */
  framesCoalesced: number;
  transcodeSeconds: number;
  /** Input bytes skipped after gaps (gap()) to the next boundary the container lets us verify. */
  gapBytes: number;
  source?: SourceKind;
}

export interface AudioPipeline {
  push(chunk: Buffer): void;
  /** Client flush (`final` false) or end (default): everything buffered goes out, paced; resolves when
   * the last frame has been passed to onFrame. An end also finishes a transcoded stream (its tail).
   * More audio may follow. */
  sendHeld(final?: boolean): Promise<void>;
  /** The gateway drains: paced audio goes out at once from now on, so the session's end is not cut. */
  hurry(): void;
  /** The client's input pauses here (its end reached a session whose upstream session is not open
   * yet): units the parser holds only for want of more input come out now, before that session's
   * replay is taken. */
  pauseInput(): void;
  /** The bytes that follow may not continue the previous ones (a client came back; bytes it sent
   * just before it dropped may be lost): input is skipped to the next container boundary that can
   * be verified (none when they do continue), so a unit cut in the middle never goes upstream. */
  gap(expect?: Continuation['expect']): void;
  /** What a pipeline primed with this stream's headers (another replica's) needs before the rest of
   * the stream, to parse it as this one would from here: e.g. the open WebM Cluster's head (pushed,
   * then gap(expect)). */
  continuation(): Continuation | undefined;
  /** Drops the output waiting to be re-chunked or paced (a reconnection's replay carries it). */
  discardQueued(): void;
  close(): void;
  readonly stats: AudioStats;
  readonly bufferedBytes: number;
}

/** Source kinds the upstream takes as they are; the rest are transcoded to Ogg/Opus. */
export const PASSTHROUGH_KINDS: ReadonlySet<SourceKind> = new Set<SourceKind>([
  'webm-opus',
  'webm-vorbis',
  'ogg-opus',
  'ogg-vorbis',
  'flac',
  'mp3',
  'mp4-aac',
  'mp4-mp3',
]);

export const KIND_LABEL: Record<SourceKind, string> = {
  'webm-opus': 'WebM/Opus',
  'webm-vorbis': 'WebM/Vorbis',
  'webm-pcm': 'WebM/PCM',
  'ogg-opus': 'Ogg/Opus',
  'ogg-vorbis': 'Ogg/Vorbis',
  wav: 'WAV',
  flac: 'FLAC',
  mp3: 'MP3',
  'mp4-aac': 'MP4/AAC',
  'mp4-opus': 'MP4/Opus',
  'mp4-mp3': 'MP4/MP3',
  pcm: 'raw PCM',
};
