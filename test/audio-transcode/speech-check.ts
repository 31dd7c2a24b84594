// Does decoded Opus still carry the input's speech? Two objective measures against the input PCM
// (both 16 kHz mono s16le, time-aligned: the decoder applies the pre-skip, so no lag is searched
// and a wrong pre-skip shows as a low SNR):
// - log-mel distance: RMS over 40 mel bands (60 Hz-7.6 kHz, 32 ms windows every 10 ms, what a
//   recogniser's front end sees) of the dB difference, averaged over frames within 40 dB of the
//   loudest (speech, not the pauses' noise floor). On the dictation fixture: libopus defaults 2.7
//   dB, our settings ~4.3, 12 kb/s ~6.5, a narrowband cap ~16, 8 kb/s ~17.
// - SNR of the waveform, in dB.
// The FFT is a textbook radix-2 one: 25 lines, not worth a dependency for a test and a benchmark.

/** Bounds a transcoder's output must meet on the dictation fixture (bench/transcode reports them). */
export const SPEECH_BOUNDS = { maxLogMelDb: 6, minSnrDb: 10 } as const;

const RATE = 16000;
const N = 512;
const HOP = 160;
const BANDS = 40;
const FLOOR = 1e3; // power floor, so that digital silence does not count as -inf dB

function fft(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j], re[i]];
      [im[i], im[j]] = [im[j], im[i]];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (-2 * Math.PI) / len,
      wr = Math.cos(ang),
      wi = Math.sin(ang);
    for (let i = 0; i < n; i += len) {
      let cr = 1,
        ci = 0;
      for (let k = 0; k < len / 2; k++) {
        const a = i + k,
          b = a + len / 2;
        const tr = re[b] * cr - im[b] * ci,
          ti = re[b] * ci + im[b] * cr;
        re[b] = re[a] - tr;
        im[b] = im[a] - ti;
        re[a] += tr;
        im[a] += ti;
        const t = cr * wr - ci * wi;
        ci = cr * wi + ci * wr;
        cr = t;
      }
    }
  }
}

const mel = (f: number) => 2595 * Math.log10(1 + f / 700);
const hz = (m: number) => 700 * (10 ** (m / 2595) - 1);
/** Triangle edges in FFT bins. */
const EDGES = Array.from(
  { length: BANDS + 2 },
  (_, i) => (hz(mel(60) + ((mel(7600) - mel(60)) * i) / (BANDS + 1)) * N) / RATE,
);
const WINDOW = Float64Array.from({ length: N }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / N));

function logMel(x: Int16Array): Float64Array[] {
  const frames: Float64Array[] = [];
  const re = new Float64Array(N),
    im = new Float64Array(N);
  for (let s = 0; s + N <= x.length; s += HOP) {
    for (let i = 0; i < N; i++) {
      re[i] = x[s + i] * WINDOW[i];
      im[i] = 0;
    }
    fft(re, im);
    const bands = new Float64Array(BANDS);
    for (let b = 0; b < BANDS; b++) {
      const [l, c, r] = [EDGES[b], EDGES[b + 1], EDGES[b + 2]];
      let e = 0;
      for (let k = Math.ceil(l); k <= r; k++)
        e += (k <= c ? (k - l) / (c - l) : (r - k) / (r - c)) * (re[k] ** 2 + im[k] ** 2);
      bands[b] = 10 * Math.log10(e + FLOOR);
    }
    frames.push(bands);
  }
  return frames;
}

const samples = (b: Buffer) => new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + (b.length & ~1)));

/** Distance of `decoded` from `input` (both 16 kHz mono s16le); only their common length counts. */
export function speechDistance(input: Buffer, decoded: Buffer): { logMelDb: number; snrDb: number } {
  const x = samples(input),
    y = samples(decoded);
  const a = logMel(x),
    b = logMel(y);
  const loudness = a.map((f) => Math.max(...f));
  const loudest = Math.max(...loudness);
  let sum = 0,
    frames = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (loudness[i] < loudest - 40) continue;
    let d = 0;
    for (let k = 0; k < BANDS; k++) d += (a[i][k] - b[i][k]) ** 2;
    sum += Math.sqrt(d / BANDS);
    frames++;
  }
  let signal = 0,
    noise = 0;
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    signal += x[i] ** 2;
    noise += (x[i] - y[i]) ** 2;
  }
  return { logMelDb: sum / frames, snrDb: 10 * Math.log10(signal / noise) };
}
