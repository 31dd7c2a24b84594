// Container family → parser, and (container, codec) → the source kind the plan is checked against.
import { echo } from '../protocol/index.js';
import {
  FlacParser,
  Mp3Parser,
  Mp4Parser,
  OggParser,
  WavParser,
  WebmParser,
  type ContainerParser,
  type PacketSink,
  type TrackInfo,
} from './containers/index.js';
import type { Container } from './sniff.js';
import type { SourceKind } from './types.js';

/** `runSeconds`: see WebmParserOptions (the other containers make a unit per packet or page);
 *  `onPacket`: the Opus packets of a WebM or Ogg stream (see PacketSink). */
export function createParser(c: Container, o: { runSeconds?: number; onPacket?: PacketSink } = {}): ContainerParser {
  switch (c) {
    case 'webm':
      return new WebmParser(o);
    case 'ogg':
      return new OggParser(o.onPacket);
    case 'wav':
      return new WavParser();
    case 'mp4':
      return new Mp4Parser();
    case 'mp3':
      return new Mp3Parser();
    case 'flac':
      return new FlacParser();
  }
}

export const CONTAINER_LABEL: Record<Container, string> = {
  webm: 'WebM',
  ogg: 'Ogg',
  wav: 'WAV',
  mp4: 'MP4',
  mp3: 'MP3',
  flac: 'FLAC',
};

/** The kind, or undefined with a label of what the stream is for the error message. */
export function sourceKind(c: Container | 'pcm', info: TrackInfo): { kind?: SourceKind; label: string } {
  const codec = info.codec;
  const k = ((): SourceKind | undefined => {
    switch (c) {
      case 'webm':
        return codec === 'opus'
          ? 'webm-opus'
          : codec === 'vorbis'
            ? 'webm-vorbis'
            : codec.startsWith('pcm-')
              ? 'webm-pcm'
              : undefined;
      case 'ogg':
        return codec === 'opus' ? 'ogg-opus' : codec === 'vorbis' ? 'ogg-vorbis' : undefined;
      case 'wav':
        return codec.startsWith('pcm-') ? 'wav' : undefined;
      case 'mp4':
        return codec === 'aac' ? 'mp4-aac' : codec === 'opus' ? 'mp4-opus' : codec === 'mp3' ? 'mp4-mp3' : undefined;
      case 'mp3':
        return 'mp3';
      case 'flac':
        return 'flac';
      case 'pcm':
        return 'pcm';
    }
  })();
  // An unknown codec is client bytes (a WebM CodecID, an MP4 sample entry type): quoted, short.
  return {
    kind: k,
    label:
      c === 'pcm'
        ? 'raw PCM'
        : k
          ? `${CONTAINER_LABEL[c]}/${codec}`
          : `${CONTAINER_LABEL[c]} with codec ${echo(codec)}`,
  };
}
