// The Opus range decoder of RFC 6716, section 4.1 ("Range Decoder"), only as much of it as the
// speech detector reads: the first symbols of a frame (SILK's VAD flags, CELT's header flags and
// coarse band energies). Hand-written: no npm package exposes it (the Opus libraries decode whole
// frames to PCM, which costs about 100 times the detector's CPU budget). One instance is reused for
// every frame, so reading a packet allocates nothing.

/** Bits of the coder's state (EC_CODE_BITS); the bottom of its normalised range is 2^23. */
const CODE_BOT = 1 << 23;
const CODE_MASK = 0x7fffffff;

export class RangeDecoder {
  private buf: Uint8Array = new Uint8Array(0);
  private offs = 0;
  private end = 0;
  /** The range; a JS number (up to 2^31, past int32's positive half). */
  private rng = 0;
  private val = 0;
  private rem = 0;
  private ext = 0;
  private nbitsTotal = 0;
  /** Bytes of the frame being read. */
  storage = 0;

  /** Starts reading the frame buf[start, start + length). */
  init(buf: Uint8Array, start: number, length: number): void {
    this.buf = buf;
    this.offs = start;
    this.end = start + length;
    this.storage = length;
    // RFC 6716 4.1.1: 9 bits are counted as read before the first byte.
    this.nbitsTotal = 9;
    this.rng = 128;
    this.rem = this.byte();
    this.val = 127 - (this.rem >> 1);
    this.normalize();
  }

  private byte(): number {
    return this.offs < this.end ? this.buf[this.offs++] : 0;
  }

  private normalize(): void {
    while (this.rng <= CODE_BOT) {
      this.nbitsTotal += 8;
      this.rng *= 256;
      const sym = this.rem;
      this.rem = this.byte();
      const bits = ((sym << 8) | this.rem) >> 1;
      this.val = ((this.val << 8) + (255 & ~bits)) & CODE_MASK;
    }
  }

  /** Bits read so far, rounded up (ec_tell). */
  tell(): number {
    return this.nbitsTotal - (32 - Math.clz32(this.rng));
  }

  /** A symbol of frequency total 2^bits (ec_decode_bin); follow with update(). */
  decodeBin(bits: number): number {
    this.ext = this.rng >>> bits;
    const s = Math.floor(this.val / this.ext);
    const ft = 1 << bits;
    return ft - Math.min(s + 1, ft);
  }

  /** A symbol of frequency total ft (ec_decode); follow with update(). */
  decode(ft: number): number {
    this.ext = Math.floor(this.rng / ft);
    const s = Math.floor(this.val / this.ext);
    return ft - Math.min(s + 1, ft);
  }

  /** Takes the symbol [fl, fh) of total ft out of the state (ec_dec_update). */
  update(fl: number, fh: number, ft: number): void {
    const s = this.ext * (ft - fh);
    this.val -= s;
    this.rng = fl > 0 ? this.ext * (fh - fl) : this.rng - s;
    this.normalize();
  }

  /** One binary symbol whose probability of 1 is 2^-logp (ec_dec_bit_logp). */
  bitLogp(logp: number): number {
    const s = this.rng >>> logp;
    const one = this.val < s;
    if (!one) this.val -= s;
    this.rng = one ? s : this.rng - s;
    this.normalize();
    return one ? 1 : 0;
  }

  /** A symbol from an inverse cumulative table of total 2^ftb (ec_dec_icdf). */
  icdf(table: readonly number[], ftb: number): number {
    let s = this.rng;
    const r = this.rng >>> ftb;
    let ret = -1;
    let t: number;
    do {
      t = s;
      s = r * table[++ret];
    } while (this.val < s);
    this.val -= s;
    this.rng = t - s;
    this.normalize();
    return ret;
  }

  /** A uniform integer below ft, for ft of at most 256 (ec_dec_uint's short form). */
  uintSmall(ft: number): number {
    const s = this.decode(ft);
    this.update(s, s + 1, ft);
    return s;
  }

  /** Raw bits are read from the frame's end (ec_dec_bits); the detector only counts them. */
  skipRawBits(bits: number): void {
    this.nbitsTotal += bits;
  }
}
