// Scoring a detector's stretches against a clip's truth on a 10 ms grid, and running the detector
// over a file's Opus packets at their media times (from each TOC, as the gateway's pipeline counts).
import { opusPacketSamples48 } from '../../../src/audio/transcode/index.js';
import { SpeechDetector, type SpeechDetectorOptions } from '../../../src/audio/index.js';

export interface Score {
  /** Seconds of true speech, and of it found. */
  truth: number;
  found: number;
  /** Seconds that are not speech (silence, noise, music), and of it called speech. */
  quiet: number;
  falseSpeech: number;
  /** Seconds the detector called speech, in all. */
  detected: number;
  unknown: number;
}

const STEP = 0.01;

function mask(intervals: Array<[number, number]>, cells: number, shift = 0): Uint8Array {
  const m = new Uint8Array(cells);
  for (const [a, b] of intervals) {
    const i0 = Math.max(0, Math.round((a + shift) / STEP));
    const i1 = Math.min(cells, Math.round((b + shift) / STEP));
    for (let i = i0; i < i1; i++) m[i] = 1;
  }
  return m;
}

/** Scores `found` against `truth` over [0, seconds); `shift` moves the truth (a recording's lag). */
export function score(
  truth: Array<[number, number]>,
  found: Array<[number, number]>,
  seconds: number,
  unknown = 0,
  shift = 0,
): Score {
  const cells = Math.floor(seconds / STEP);
  const t = mask(truth, cells, shift);
  const d = mask(found, cells);
  const s: Score = { truth: 0, found: 0, quiet: 0, falseSpeech: 0, detected: 0, unknown };
  for (let i = 0; i < cells; i++) {
    if (t[i]) s.truth += STEP;
    else s.quiet += STEP;
    if (d[i]) s.detected += STEP;
    if (d[i] && t[i]) s.found += STEP;
    if (d[i] && !t[i]) s.falseSpeech += STEP;
  }
  return s;
}

export interface Detected {
  detector: SpeechDetector;
  seconds: number;
  stretches: Array<[number, number]>;
}

/** Runs a new detector over packets laid end to end from media time 0. */
export function detectPackets(packets: Uint8Array[], options: SpeechDetectorOptions = {}): Detected {
  const detector = new SpeechDetector({ maxStretches: 4096, ...options });
  let t = 0;
  for (const p of packets) {
    let d: number;
    try {
      d = opusPacketSamples48(p) / 48000;
    } catch {
      continue;
    }
    detector.packet(p, t, d);
    t += d;
  }
  return { detector, seconds: t, stretches: detector.stretches() };
}
