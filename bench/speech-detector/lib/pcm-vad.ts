// The benchmark's peer for PCM: the WebRTC VAD, libfvad compiled to WASM (@echogarden/fvad-wasm), on
// 10 ms frames of the PCM a client would send, its verdicts into a SpeechDetector. Measured against
// the gateway's own path for PCM (the packet detector on its encoder's output): as accurate, at five
// times the CPU, so the gateway does not ship it.
import type { FvadModule } from '@echogarden/fvad-wasm';
import type { SpeechDetector } from '../../../src/audio/index.js';

/** The rates libfvad takes. */
export const FVAD_RATES = [8000, 16000, 32000, 48000] as const;

let module: Promise<FvadModule> | undefined;

export class PcmSpeech {
  private readonly frame: Int16Array;
  private fill = 0;
  private t = 0;
  private closed = false;

  private constructor(
    private readonly m: FvadModule,
    private readonly handle: number,
    private readonly heap: number,
    private readonly detector: SpeechDetector,
    rate: number,
  ) {
    this.frame = new Int16Array(rate / 100);
  }

  /**
   * A VAD for mono s16 PCM at `rate` feeding `detector`; mode 0-3, 3 the least likely to call noise
   * speech. Throws RangeError for a rate libfvad does not take (the caller reports unknown).
   */
  static async create(detector: SpeechDetector, rate: number, mode = 3): Promise<PcmSpeech> {
    if (!(FVAD_RATES as readonly number[]).includes(rate))
      throw new RangeError(`the WebRTC VAD takes 8, 16, 32 or 48 kHz, not ${rate} Hz`);
    module ??= import('@echogarden/fvad-wasm').then((m) => m.default());
    const m = await module;
    const handle = m._fvad_new();
    if (!handle) throw new Error('fvad_new failed');
    m._fvad_set_mode(handle, mode);
    m._fvad_set_sample_rate(handle, rate);
    return new PcmSpeech(m, handle, m._malloc((rate / 100) * 2), detector, rate);
  }

  /** Samples that follow the ones before (media time counts from 0 at the first). */
  push(samples: Int16Array): void {
    if (this.closed) return;
    const n = this.frame.length;
    for (let at = 0; at < samples.length;) {
      const take = Math.min(n - this.fill, samples.length - at);
      for (let k = 0; k < take; k++) this.frame[this.fill + k] = samples[at + k]; // no view per frame
      this.fill += take;
      at += take;
      if (this.fill < n) break;
      this.fill = 0;
      // HEAP16 is read each time: the WASM memory may have grown and been replaced.
      this.m.HEAP16.set(this.frame, this.heap >> 1);
      const speech = this.m._fvad_process(this.handle, this.heap, n) === 1;
      this.detector.decision(this.t, 0.01, speech);
      this.t += 0.01;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.m._free(this.heap);
    this.m._fvad_free(this.handle);
  }
}
