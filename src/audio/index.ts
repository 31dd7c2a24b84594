// The audio pipeline's one way in: config-time planning and the per-session pipeline.
export { planAudio, type PlanResult } from './plan.js';
export { createAudioPipeline } from './pipeline.js';
export type {
  SourceKind,
  AudioPlan,
  Clock,
  AudioPipelineOptions,
  AudioStats,
  AudioPipeline,
  PcmDeclaration,
} from './types.js';
// The transcoder's worker pool: workers start with the first PCM session; closed on shutdown.
export { closeDefaultEncoderPool } from './transcode/index.js';
// Upstream reconnection: what a new upstream session is sent (init data + unreleased audio, retimed to 0).
export { createReplayBuffer, type ReplayBuffer, type ReplayKind, type ReplayOptions } from './replay.js';
export type { Continuation, PacketSink, Unit } from './containers/index.js';
export { pieceCopy } from './containers/index.js';
export * from './speech/index.js'; // speech stretches of the forwarded audio (SpeechDetector)
