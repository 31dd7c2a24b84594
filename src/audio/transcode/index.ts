// PCM → Ogg/Opus transcoding and Ogg Opus muxing (for Opus packets remuxed without re-encoding).
export type { PcmFormat } from './pcm-format.js';
export { OPUS_RATES, assertPcmFormat, encoderRate } from './pcm-format.js';
export { createPcmToOpus, setDefaultTranscodeMode } from './pcm-to-opus.js';
export type { PcmToOpus, PcmToOpusOptions, TranscodeMode } from './pcm-to-opus.js';
export { createOggOpusMuxer } from './ogg-opus-muxer.js';
export type { OggOpusMuxer, OggOpusMuxerOptions } from './ogg-opus-muxer.js';
export { createEncoderPool, closeDefaultEncoderPool } from './encoder-pool.js';
export type { EncoderPool } from './encoder-pool.js';
export { opusPacketSamples48 } from './opus-toc.js';
export { oggCrc32, PAGE_BOS, PAGE_CONTINUED, PAGE_EOS } from './ogg-page.js';
