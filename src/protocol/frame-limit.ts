// The upstream's limit on one binary WebSocket frame of audio: larger frames are a protocol
// violation there, so the pipeline, the replay, the upstream link and the emulator all cut to it.
export const UPSTREAM_MAX_FRAME_BYTES = 64_000;
