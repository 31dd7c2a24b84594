// The first symbols of a SILK frame (RFC 6716, sections 4.2.3 to 4.2.7.4): the encoder's VAD flags,
// the LBRR flag, then, for a mono frame without LBRR data, the first frame's type and its first
// subframe's gain, coded independently at the start of every Opus frame (table 11: MSB by signal
// type, then 3 uniform LSBs; 64 levels about 1.37 dB apart). The gain is the excitation's level: it
// follows the speaker's level, and a steady noise's, which the SILK VAD flag alone calls speech.
import type { RangeDecoder } from './range-decoder.js';

/** Frame type with and without voice activity (RFC 6716 4.2.7.3, table 9), as inverse CDFs. */
const TYPE_ACTIVE_ICDF = [232, 158, 10, 0];
const TYPE_INACTIVE_ICDF = [230, 0];
/** The gain's MSB per signal type (inactive, unvoiced, voiced; table 11) and its 3 LSBs. */
const GAIN_MSB_ICDF = [
  [224, 112, 44, 15, 3, 2, 1, 0],
  [254, 237, 192, 132, 70, 23, 4, 0],
  [255, 252, 226, 155, 61, 11, 2, 0],
];
const UNIFORM8_ICDF = [224, 192, 160, 128, 96, 64, 32, 0];

/** dB per gain index step: 64 levels over 2-88 dB. */
export const SILK_GAIN_STEP_DB = 86 / 63;

export class SilkHeader {
  /** VAD flags of the SILK frames, bit k for frame k (mid and side channels together). */
  vad = 0;
  /** The first frame's first gain index (0-63), or -1 where it is not read (stereo, LBRR data). */
  gain = -1;

  /** Reads the header of the Opus frame buf[offset, offset + length) with `frames` SILK frames. */
  read(rd: RangeDecoder, buf: Uint8Array, offset: number, length: number, frames: number, channels: number): void {
    rd.init(buf, offset, length);
    let mid = 0;
    for (let k = 0; k < frames; k++) mid |= rd.bitLogp(1) << k;
    const lbrr = rd.bitLogp(1);
    let side = 0;
    if (channels === 2) {
      for (let k = 0; k < frames; k++) side |= rd.bitLogp(1) << k;
      rd.bitLogp(1); // the side channel's LBRR flag
    }
    this.vad = mid | side;
    this.gain = -1;
    // Stereo frames put the stereo prediction first, LBRR frames put redundant frames first: the
    // gain is then deeper than this reader goes.
    if (channels === 2 || lbrr) return;
    const active = mid & 1;
    const type = active ? rd.icdf(TYPE_ACTIVE_ICDF, 8) + 2 : rd.icdf(TYPE_INACTIVE_ICDF, 8);
    const msb = rd.icdf(GAIN_MSB_ICDF[type >> 1], 8);
    this.gain = msb * 8 + rd.icdf(UNIFORM8_ICDF, 8);
  }
}
