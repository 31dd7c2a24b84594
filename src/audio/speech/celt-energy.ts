// The coarse band energies of a CELT frame, read without decoding it: RFC 6716, section 4.3.2.1
// ("Coarse Energy Decoding"), after the header symbols of section 4.3 (silence, post-filter,
// transient, intra; table 56). Hand-written: no npm package exposes them (the Opus libraries decode
// to PCM, 100 times the detector's CPU budget). The fine energy is not read (it needs the whole bit
// allocation); the prediction then runs on the coarse values alone, off by at most a few dB.
import type { RangeDecoder } from './range-decoder.js';

/** CELT's 21 bands. Edges in Hz at 48 kHz: 0 200 400 ... 1600 2000 2400 2800 3200 4000 4800 ... */
export const CELT_BANDS = 21;

/** Bands read: 0-4 kHz (bands 0-11), where speech has its energy. */
export const READ_BANDS = 12;

/** Per band, the mean the encoder takes out (log2 amplitude; RFC 6716 4.3.2, the eMeans table). */
const E_MEANS = [
  6.4375, 6.25, 5.75, 5.3125, 5.0625, 4.8125, 4.5, 4.375, 4.875, 4.6875, 4.5625, 4.4375, 4.875, 4.625, 4.3125, 4.5,
  4.375, 4.625, 4.75, 4.4375, 3.75,
];

/** Time and band prediction coefficients per frame size (RFC 6716 4.3.2.1), in Q15. */
const PRED_COEF = [29440 / 32768, 26112 / 32768, 21248 / 32768, 16384 / 32768];
const BETA_COEF = [30147 / 32768, 22282 / 32768, 12124 / 32768, 6554 / 32768];
const BETA_INTRA = 4915 / 32768;

/**
 * The Laplace model of each band's coarse energy: for each frame size (2.5, 5, 10, 20 ms), inter
 * then intra, 21 pairs of (probability of 0, decay), Q8 (RFC 6716 4.3.2.1, e_prob_model).
 */
const E_PROB_MODEL: readonly (readonly number[])[] = [
  [
    72, 127, 65, 129, 66, 128, 65, 128, 64, 128, 62, 128, 64, 128, 64, 128, 92, 78, 92, 79, 92, 78, 90, 79, 116, 41,
    115, 40, 114, 40, 132, 26, 132, 26, 145, 17, 161, 12, 176, 10, 177, 11,
  ],
  [
    24, 179, 48, 138, 54, 135, 54, 132, 53, 134, 56, 133, 55, 132, 55, 132, 61, 114, 70, 96, 74, 88, 75, 88, 87, 74, 89,
    66, 91, 67, 100, 59, 108, 50, 120, 40, 122, 37, 97, 43, 78, 50,
  ],
  [
    83, 78, 84, 81, 88, 75, 86, 74, 87, 71, 90, 73, 93, 74, 93, 74, 109, 40, 114, 36, 117, 34, 117, 34, 143, 17, 145,
    18, 146, 19, 162, 12, 165, 10, 178, 7, 189, 6, 190, 8, 177, 9,
  ],
  [
    23, 178, 54, 115, 63, 102, 66, 98, 69, 99, 74, 89, 71, 91, 73, 91, 78, 89, 86, 80, 92, 66, 93, 64, 102, 59, 103, 60,
    104, 60, 117, 52, 123, 44, 138, 35, 133, 31, 97, 38, 77, 45,
  ],
  [
    61, 90, 93, 60, 105, 42, 107, 41, 110, 45, 116, 38, 113, 38, 112, 38, 124, 26, 132, 27, 136, 19, 140, 20, 155, 14,
    159, 16, 158, 18, 170, 13, 177, 10, 187, 8, 192, 6, 175, 9, 159, 10,
  ],
  [
    21, 178, 59, 110, 71, 86, 75, 85, 84, 83, 91, 66, 88, 73, 87, 72, 92, 75, 98, 72, 105, 58, 107, 54, 115, 52, 114,
    55, 112, 56, 129, 51, 132, 40, 150, 33, 140, 29, 98, 35, 77, 42,
  ],
  [
    42, 121, 96, 66, 108, 43, 111, 40, 117, 44, 123, 32, 120, 36, 119, 33, 127, 33, 134, 34, 139, 21, 147, 23, 152, 20,
    158, 25, 154, 26, 166, 21, 173, 16, 184, 13, 184, 10, 150, 13, 139, 15,
  ],
  [
    22, 178, 63, 114, 74, 82, 84, 83, 92, 82, 103, 62, 96, 72, 96, 67, 101, 73, 107, 72, 113, 55, 118, 52, 125, 52, 118,
    52, 117, 55, 135, 49, 137, 39, 157, 32, 145, 29, 97, 33, 77, 40,
  ],
];

const SMALL_ENERGY_ICDF = [2, 1, 0];
const TAPSET_ICDF = [2, 1, 0];

/** What one frame said. */
export const enum CeltFrame {
  /** Band energies read into the state. */
  Energies = 0,
  /** The encoder's silence flag (digital silence); the state is reset to silence. */
  Silence = 1,
}

/** A stream's prediction state: the last frame's coarse energy per channel and band (log2). */
export class CeltEnergyState {
  readonly old = new Float64Array(2 * CELT_BANDS);
  reset(): void {
    this.old.fill(0);
  }
}

/** log2 amplitude of silence in the decoder (it sets a silent frame's energies so). */
const SILENT_LOG2 = -28;

/**
 * Reads the header and the coarse energies of bands [0, bands) of one CELT frame: lm 0-3 (2.5 to
 * 20 ms), channels 1 or 2. The energies (log2 amplitude, means added back) stay in state.old.
 */
export function readCeltEnergies(
  rd: RangeDecoder,
  buf: Uint8Array,
  offset: number,
  length: number,
  lm: number,
  channels: number,
  bands: number,
  state: CeltEnergyState,
): CeltFrame {
  rd.init(buf, offset, length);
  const total = length * 8;
  let tell = rd.tell();
  const silence = tell >= total ? 1 : tell === 1 ? rd.bitLogp(15) : 0;
  if (silence) {
    state.old.fill(SILENT_LOG2);
    return CeltFrame.Silence;
  }
  if (tell + 16 <= total) {
    if (rd.bitLogp(1)) {
      // Post-filter: octave, period and gain (raw bits), tapset.
      const octave = rd.uintSmall(6);
      rd.skipRawBits(4 + octave + 3);
      if (rd.tell() + 2 <= total) rd.icdf(TAPSET_ICDF, 2);
    }
    tell = rd.tell();
  }
  if (lm > 0 && tell + 3 <= total) {
    rd.bitLogp(3); // transient
    tell = rd.tell();
  }
  const intra = tell + 3 <= total ? rd.bitLogp(3) : 0;
  coarse(rd, total, lm, intra, channels, bands, state.old);
  if (channels === 1) state.old.copyWithin(CELT_BANDS, 0, bands);
  return CeltFrame.Energies;
}

/** The band's log2 amplitude as the decoder would scale it (the encoder's mean added back). */
export function bandLog2(state: CeltEnergyState, band: number, channel: number): number {
  return state.old[channel * CELT_BANDS + band] + E_MEANS[band];
}

function coarse(
  rd: RangeDecoder,
  budget: number,
  lm: number,
  intra: number,
  channels: number,
  bands: number,
  old: Float64Array,
): void {
  const model = E_PROB_MODEL[2 * lm + intra];
  const coef = intra ? 0 : PRED_COEF[lm];
  const beta = intra ? BETA_INTRA : BETA_COEF[lm];
  let prev0 = 0;
  let prev1 = 0;
  for (let i = 0; i < bands; i++) {
    for (let c = 0; c < channels; c++) {
      const left = budget - rd.tell();
      let qi: number;
      if (left >= 15) {
        const pi = 2 * Math.min(i, 20);
        qi = laplace(rd, model[pi] << 7, model[pi + 1] << 6);
      } else if (left >= 2) {
        qi = rd.icdf(SMALL_ENERGY_ICDF, 2);
        qi = (qi >> 1) ^ -(qi & 1);
      } else if (left >= 1) qi = -rd.bitLogp(1);
      else qi = -1;
      const k = c * CELT_BANDS + i;
      const prev = c === 0 ? prev0 : prev1;
      old[k] = coef * Math.max(-9, old[k]) + prev + qi;
      if (c === 0) prev0 = prev + qi - beta * qi;
      else prev1 = prev + qi - beta * qi;
    }
  }
}

/** RFC 6716 4.3.2.1's Laplace-like symbol: fs the probability of 0, decay the geometric ratio (Q15). */
function laplace(rd: RangeDecoder, fs: number, decay: number): number {
  let val = 0;
  let fl = 0;
  const fm = rd.decodeBin(15);
  if (fm >= fs) {
    val++;
    fl = fs;
    fs = (((32768 - 32 - fs) * (16384 - decay)) >> 15) + 1;
    while (fs > 1 && fm >= fl + 2 * fs) {
      fs *= 2;
      fl += fs;
      fs = (((fs - 2) * decay) >> 15) + 1;
      val++;
    }
    if (fs <= 1) {
      const di = (fm - fl) >> 1;
      val += di;
      fl += 2 * di;
    }
    if (fm < fl + fs) val = -val;
    else fl += fs;
  }
  rd.update(fl, Math.min(fl + fs, 32768), 32768);
  return val;
}
