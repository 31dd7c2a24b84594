// The audio pipeline's one way in: config-time planning and the per-session pipeline.
export { planAudio, type PlanResult } from './plan.js';
export { createAudioPipeline } from './pipeline.js';
export type { SourceKind, AudioPlan, Clock, AudioPipelineOptions, AudioStats, AudioPipeline, PcmDeclaration } from './types.js';
// The transcoder's worker pool: warmed at start-up so the first PCM session does not wait for a
// worker to boot, closed on shutdown.
export { warmDefaultEncoderPool, closeDefaultEncoderPool } from './transcode/index.js';
