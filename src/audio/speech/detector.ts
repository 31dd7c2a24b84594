// Which stretches of a session's audio hold speech, read from the Opus packets it forwards without
// decoding them (decoding costs 3.5-13 ms of CPU per audio second; this costs microseconds):
// - SILK and Hybrid frames carry the encoder's own voice-activity flag per 20 ms (RFC 6716 4.2.3);
// - CELT frames (Chromium's MediaRecorder) carry their band energies: a frame is speech when its
//   0-4 kHz level stands a margin above the floor of the last seconds (level-floor.ts).
// Decisions go into a bounded list of stretches (stretches.ts). No allocation per packet.
import { bandLog2, CeltEnergyState, CeltFrame, READ_BANDS, readCeltEnergies } from './celt-energy.js';
import { LevelFloor, type LevelOptions } from './level-floor.js';
import { OpusFrames, OpusMode, opusMode } from './opus-frames.js';
import { RangeDecoder } from './range-decoder.js';
import { SILK_GAIN_STEP_DB, SilkHeader } from './silk-header.js';
import { Stretches, type StretchOptions } from './stretches.js';

export interface SilkOptions {
  /** dB the first SILK gain of a frame must stand above its floor for the VAD flag to count. */
  silkMarginDb: number;
}

export type SpeechDetectorOptions = Partial<StretchOptions & LevelOptions & SilkOptions>;

/** Chosen with bench/speech-detector on the labelled set (bench/NOTES.md, "Speech detector"). */
export const SPEECH_DEFAULTS: StretchOptions & LevelOptions & SilkOptions = {
  bridgeSeconds: 0.4,
  onsetSeconds: 0.1,
  maxStretches: 256,
  marginDb: 10,
  floorSeconds: 2,
  minLevelDb: 6,
  silkMarginDb: 4,
};

/** 2^(2x), the energy of a band of log2 amplitude x, in steps of 1/16 from x = -32 to 32. */
const ENERGY = Float64Array.from({ length: 1025 }, (_, i) => 2 ** (2 * ((i - 512) / 16)));
function energyOf(log2Amplitude: number): number {
  const i = Math.round(log2Amplitude * 16) + 512;
  return ENERGY[i < 0 ? 0 : i > 1024 ? 1024 : i];
}

const LM_OF_SAMPLES: Record<number, number> = { 120: 0, 240: 1, 480: 2, 960: 3 };

export class SpeechDetector {
  private readonly rd = new RangeDecoder();
  private readonly frames = new OpusFrames();
  private readonly celt = new CeltEnergyState();
  private readonly level: LevelFloor;
  private readonly silkHeader = new SilkHeader();
  private readonly silkLevel: LevelFloor;
  private readonly list: Stretches;
  private lastMode = -1;
  /** Media seconds given a verdict (speech or not). */
  judgedSeconds = 0;
  /** Media seconds the detector could not judge (malformed packets, codecs it cannot read). */
  unknownSeconds = 0;

  constructor(options: SpeechDetectorOptions = {}) {
    const o = { ...SPEECH_DEFAULTS, ...options };
    this.level = new LevelFloor(o);
    this.silkLevel = new LevelFloor({ ...o, marginDb: o.silkMarginDb, minLevelDb: -Infinity });
    this.list = new Stretches(o);
  }

  /** One Opus packet covering [mediaStart, mediaStart + duration) seconds of the session's media. */
  packet(p: Uint8Array, mediaStart: number, duration: number): void {
    if (!(duration > 0) || !Number.isFinite(mediaStart + duration)) return; // no media: nothing to judge
    if (!this.frames.read(p)) {
      this.unknown(mediaStart, duration);
      return;
    }
    const mode = opusMode(p[0]);
    const channels = p[0] & 4 ? 2 : 1;
    // libopus resets its CELT state when a stream switches to CELT; so does the detector.
    if (mode === OpusMode.Celt && this.lastMode !== OpusMode.Celt) {
      this.celt.reset();
      this.level.reset();
    }
    this.lastMode = mode;
    const n = this.frames.count;
    const d = duration / n;
    for (let i = 0; i < n; i++) {
      const t = mediaStart + i * d;
      if (mode === OpusMode.Celt) this.decision(t, d, this.celtSpeech(p, i, channels, d));
      else this.silk(p, i, mode, channels, t, d);
    }
  }

  /** Media the detector cannot judge (another codec, a malformed packet). */
  unknown(_mediaStart: number, duration: number): void {
    this.unknownSeconds += duration;
  }

  /** A verdict from elsewhere (the benchmark's WebRTC VAD peer) for [start, start + duration). */
  decision(start: number, duration: number, speech: boolean): void {
    this.judgedSeconds += duration;
    if (speech) this.list.speech(start, start + duration);
    else this.list.quiet(start + duration);
  }

  /** Seconds of speech found so far. */
  get speechSeconds(): number {
    return this.list.seconds;
  }
  /** Speech seconds inside [from, to) of the stretches still kept. */
  speechBetween(from: number, to: number): number {
    return this.list.between(from, to);
  }
  get stretchCount(): number {
    return this.list.count;
  }
  /** The i-th kept stretch, oldest first (allocation-free). */
  stretchStart(i: number): number {
    return this.list.start(i);
  }
  stretchEnd(i: number): number {
    return this.list.end(i);
  }
  /** The kept stretches as [start, end) pairs (allocates; for reports and tests). */
  stretches(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    for (let i = 0; i < this.list.count; i++) out.push([this.list.start(i), this.list.end(i)]);
    return out;
  }

  private celtSpeech(p: Uint8Array, i: number, channels: number, seconds: number): boolean {
    const len = this.frames.length[i];
    const lm = LM_OF_SAMPLES[this.frames.frameSamples];
    // A frame of 0 or 1 byte is discontinuous transmission: the encoder heard nothing.
    if (len <= 1 || lm === undefined) return this.level.frame(-Infinity, seconds);
    const kind = readCeltEnergies(this.rd, p, this.frames.offset[i], len, lm, channels, READ_BANDS, this.celt);
    if (kind === CeltFrame.Silence) return this.level.frame(-Infinity, seconds);
    // The bands' energy (bands 1-11, 200 Hz-4 kHz) in dB; powers of 2 from a table (Math.pow per band
    // was most of the detector's CPU).
    let e = 0;
    for (let c = 0; c < channels; c++) for (let b = 1; b < READ_BANDS; b++) e += energyOf(bandLog2(this.celt, b, c));
    return this.level.frame(10 * Math.log10(e / channels + 1e-30), seconds);
  }

  /**
   * SILK's VAD flags, one per 20 ms SILK frame (10 ms frames have one), each counted when the frame's
   * first gain stands above the gain floor (where it is read: mono, no LBRR data).
   */
  private silk(p: Uint8Array, i: number, mode: OpusMode, channels: number, t: number, d: number): void {
    const len = this.frames.length[i];
    const flags = mode === OpusMode.Hybrid ? 1 : Math.max(1, this.frames.frameSamples / 960);
    if (len <= 1) {
      this.silkLevel.frame(-Infinity, d);
      this.decision(t, d, false);
      return;
    }
    const h = this.silkHeader;
    h.read(this.rd, p, this.frames.offset[i], len, flags, channels);
    const loud = h.gain < 0 || this.silkLevel.frame(h.gain * SILK_GAIN_STEP_DB, d);
    const each = d / flags;
    for (let k = 0; k < flags; k++) this.decision(t + k * each, each, loud && ((h.vad >> k) & 1) === 1);
  }
}
