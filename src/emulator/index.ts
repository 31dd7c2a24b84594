// The upstream emulator: a local stand-in for the clinical speech service's auth server and its
// /transcribe and /streams sockets, for the gateway's tests, benchmarks and `npm start`.
// It is NOT speech recognition: transcripts are numbered one-second segments of the media time
// received ("[emulator] segment 7 (7.00-8.00 s)"), so tests can prove nothing was lost or
// duplicated; like a recogniser it gives silence none: a second holds a segment only if the
// gateway's own speech detector hears speech in it (media it cannot judge, such as MP3, counts as
// speech). Fault switches make it fail as the real service can, transcript faults included (a
// recogniser that stops, loses stretches, or never finalises). It enforces the upstream's protocol
// and records the rules a client broke. It stays
// small however long it runs: only configured realms (and those made in-process) are served, and
// only the most recent sessions, logs and a bounded total of audio are kept.
export { startEmulator } from './server.js';
export type {
  Emulator,
  EmulatorOptions,
  EmulatorSession,
  DropFinals,
  FaultSwitches,
  IssueTokenOptions,
  MediaRange,
  StopTranscribing,
  TranscriptFaultCounts,
  TranscriptFaultScope,
  TokenRequestRecord,
} from './types.js';
export { isSupportedAudioFormat } from './config-check.js';
export { opusPacketSeconds } from './opus-toc.js';
export { createMediaClock, type MediaClock } from './media-clock.js';
export { PacingCheck, PACING } from './pacing.js';
export { sniffContainer, type Container } from './sniff.js';
