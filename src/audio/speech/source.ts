// What the detector reads for each kind of client audio. Opus (WebM, Ogg, MP4) is read from its
// packets; PCM the gateway holds (raw PCM, WAV, WebM with PCM) goes through the WebRTC VAD before it
// is encoded. Vorbis, MP3, FLAC and AAC are not judged: their packets carry no cheap speech signal
// (Vorbis floors and MP3/AAC scale factors need most of a decoder; FLAC is lossless and would need
// decoding), and decoding costs far more than the detector's budget. For those the detector reports
// unknown: the caller counts all their media as speech for coverage and never reports a stall.
import type { SourceKind } from '../types.js';

export type SpeechSource = 'opus' | 'pcm' | 'unknown';

export function speechSource(kind: SourceKind): SpeechSource {
  switch (kind) {
    case 'webm-opus':
    case 'ogg-opus':
    case 'mp4-opus':
      return 'opus';
    case 'pcm':
    case 'wav':
    case 'webm-pcm':
      return 'pcm';
    default:
      return 'unknown';
  }
}
