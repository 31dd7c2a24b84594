// Container parsers (WebM, Ogg, WAV, FLAC, MP3, MP4, raw PCM), the containers/ folder's one way in:
// each cuts its input into units (slices tagged with headers, media time and codec payload), and
// the WebM and Ogg readers the replay buffer rewrites timestamps with.
export {
  MalformedAudio,
  type ContainerParser,
  type Continuation,
  type PacketSink,
  type TrackInfo,
  type Unit,
} from './unit.js';
export { pieceCopy } from './byte-queue.js';
export { FlacParser } from './flac.js';
export { Mp3Parser } from './mp3.js';
export { Mp4Parser } from './mp4.js';
export { OggParser, readGranule } from './ogg.js';
export { PcmParser, type PcmDeclaration } from './pcm.js';
export { WavParser } from './wav.js';
export { WebmParser, children, ID, LIVE_CLUSTER, readVint, uint, type Vint } from './webm.js';
