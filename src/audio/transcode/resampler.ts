// Streaming sample-rate conversion with libsamplerate (wasm port), for rates Opus can't take.
// Required by the first stream that needs it: the library embeds its wasm as a 2 MB script and
// costs about 11 MB of RSS once loaded, which most processes never need. (require, not import():
// the package is CommonJS flagged __esModule, and tsx's import() interop would look for a default.)
import { createRequire } from 'node:module';

type Lib = typeof import('@alexanderolsen/libsamplerate-js');
const require = createRequire(import.meta.url);

export interface Resampler {
  /** Interleaved float input → resampled interleaved float output (the converter keeps a few samples back). */
  push(input: Float32Array): Float32Array;
  /** Flushes what the converter keeps back, so total output frames equal round(inputFrames × ratio). */
  flush(): Float32Array;
  destroy(): void;
}

export async function createResampler(channels: number, fromRate: number, toRate: number): Promise<Resampler> {
  // SINC_FASTEST: band-limited (~97 dB SNR), plenty for speech, and the cheapest sinc converter.
  const { create, ConverterType } = require('@alexanderolsen/libsamplerate-js') as Lib;
  const src = await create(channels, fromRate, toRate, { converterType: ConverterType.SRC_SINC_FASTEST });
  let inFrames = 0;
  let outFrames = 0;
  const copyOut = (a: Float32Array) => {
    const out = new Float32Array(a); // the library may hand back a view of wasm memory
    outFrames += out.length / channels;
    return out;
  };
  return {
    push(input) {
      if (input.length === 0) return new Float32Array(0);
      inFrames += input.length / channels;
      return copyOut(src.full(input));
    },
    flush() {
      const want = Math.round((inFrames * toRate) / fromRate);
      const parts: Float32Array[] = [];
      const zeros = new Float32Array(1024 * channels);
      // Feed silence until the held-back tail has come out; a few hundred frames suffice.
      for (let i = 0; i < 16 && outFrames < want; i++) parts.push(copyOut(src.full(zeros)));
      const all = concatFloat(parts);
      const surplus = Math.min(all.length / channels, Math.max(0, outFrames - want));
      outFrames -= surplus;
      return all.subarray(0, all.length - surplus * channels);
    },
    destroy() {
      src.destroy();
    },
  };
}

function concatFloat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
