// The speech detector's one way in: speech stretches of a session's audio from its Opus packets, no
// decoding. The gateway feeds it every Opus packet it forwards: the client's (WebM, Ogg, MP4), and for
// PCM and WAV its own encoder's, which it reads as well as the WebRTC VAD reads the PCM (bench/NOTES.md,
// "Speech detector") at a fifth of its CPU. Vorbis, MP3, FLAC and AAC are not judged.
export { SpeechDetector, SPEECH_DEFAULTS, type SpeechDetectorOptions } from './detector.js';
