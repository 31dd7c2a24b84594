// The audio pipeline's one way in: config-time planning and the per-session pipeline.
export { planAudio, type PlanResult } from './plan.js';
export { createAudioPipeline } from './pipeline.js';
export type { SourceKind, AudioPlan, Clock, AudioPipelineOptions, AudioStats, AudioPipeline, PcmDeclaration } from './types.js';
