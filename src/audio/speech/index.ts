// The speech detector's one way in: speech stretches of a session's audio from its Opus packets
// (no decoding), or from PCM with the WebRTC VAD; other codecs are not judged (source.ts).
export { SpeechDetector, SPEECH_DEFAULTS, type SpeechDetectorOptions } from './detector.js';
export { PcmSpeech, FVAD_RATES } from './pcm-vad.js';
export { speechSource, type SpeechSource } from './source.js';
