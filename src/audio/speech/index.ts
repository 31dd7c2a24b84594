// The speech detector's one way in: speech stretches of a session's audio from its Opus packets
// (no decoding), or from PCM with the WebRTC VAD; other codecs are not judged.
export { SpeechDetector, SPEECH_DEFAULTS, type SpeechDetectorOptions } from './detector.js';
