// PCM stream → Ogg/Opus bytes: a StreamEncoder (inline, or pinned in a pool worker) feeding the
// Ogg Opus muxer on the calling thread.
import { assertPcmFormat, type PcmFormat } from './pcm-format.js';
import { ENCODER_PRE_SKIP, StreamEncoder, type EncodeResult, type EndResult } from './stream-encoder.js';
import { createOggOpusMuxer } from './ogg-opus-muxer.js';
import { getDefaultEncoderPool, WorkerEncoderPool, type EncoderPool } from './encoder-pool.js';

export interface PcmToOpus {
  /** PCM bytes in any chunking → Ogg/Opus bytes (headers first) and the media duration they carry. Await calls one at a time. */
  push(pcm: Buffer): Promise<{ data: Buffer; mediaSeconds: number }>;
  /** Encodes the tail (padding trimmed by the end granule), then the EOS page. */
  end(): Promise<{ data: Buffer; mediaSeconds: number }>;
  /** Releases the encoder without an EOS page (the stream was abandoned). Idempotent; end() already releases. */
  close(): void;
  /** Seconds spent converting and encoding (for metrics). */
  readonly transcodeSeconds: number;
}

/** Where encoding runs: 'inline' on the calling thread, 'pool' in a worker thread. */
export type TranscodeMode = 'inline' | 'pool';

export interface PcmToOpusOptions {
  bitrate?: number;
  frameMs?: 20 | 40 | 60;
  /** A pool to encode in; implies mode 'pool'. */
  pool?: EncoderPool;
  mode?: TranscodeMode;
}

// The worker pool by default: a client frame may carry up to 16 MiB of PCM (minutes of audio,
// about half a second to encode), which inline would hold every session on the event loop for.
// The round trip to a worker costs CPU: bench/transcode measured ~710 real-time streams/core
// pooled against ~960 inline (a 250 ms push encodes in ~0.3 ms).
let defaultMode: TranscodeMode = 'pool';

/** Sets the mode used when createPcmToOpus gets neither `mode` nor `pool` (from config at start-up). */
export function setDefaultTranscodeMode(mode: TranscodeMode): void {
  defaultMode = mode;
}

interface Backend {
  push(pcm: Uint8Array): Promise<EncodeResult>;
  end(): Promise<EndResult>;
  close(): void;
}

function inlineBackend(format: PcmFormat, o: PcmToOpusOptions): Backend {
  const enc = StreamEncoder.create(format, { bitrate: o.bitrate, frameMs: o.frameMs });
  enc.catch(() => {}); // surfaces on the first push/end
  return {
    push: async (pcm) => (await enc).push(pcm),
    end: async () => (await enc).end(),
    close: () =>
      void enc.then(
        (e) => e.destroy(),
        () => {},
      ),
  };
}

function poolBackend(format: PcmFormat, o: PcmToOpusOptions): Backend {
  const pool = o.pool ?? getDefaultEncoderPool();
  if (!(pool instanceof WorkerEncoderPool)) throw new TypeError('pool must come from createEncoderPool()');
  return pool.open(format, { bitrate: o.bitrate, frameMs: o.frameMs });
}

export function createPcmToOpus(format: PcmFormat, o: PcmToOpusOptions = {}): PcmToOpus {
  assertPcmFormat(format);
  const mode = o.pool ? 'pool' : (o.mode ?? defaultMode);
  const backend = mode === 'pool' ? poolBackend(format, o) : inlineBackend(format, o);
  const muxer = createOggOpusMuxer({
    channels: format.channels,
    inputSampleRate: format.sampleRate,
    preSkip: ENCODER_PRE_SKIP,
  });
  let header: Buffer | undefined = muxer.header();
  let transcodeSeconds = 0;
  let reported = 0; // decoded 48 kHz samples reported so far
  let done = false;

  const withHeader = (data: Buffer) => {
    if (!header) return data;
    const h = header;
    header = undefined;
    return data.length ? Buffer.concat([h, data]) : h;
  };
  /** Samples a decoder gives back from everything up to `granule` (pre-skip dropped). */
  const report = (granule: number) => {
    const decoded = Math.max(0, granule - ENCODER_PRE_SKIP);
    const s = (decoded - reported) / 48000;
    reported = decoded;
    return s;
  };

  return {
    async push(pcm) {
      if (done) throw new Error('PcmToOpus: push after end/close');
      const r = await backend.push(pcm);
      transcodeSeconds += r.seconds;
      const { data } = muxer.write(r.packets);
      return { data: withHeader(data), mediaSeconds: report(muxer.granule) };
    },
    async end() {
      if (done) throw new Error('PcmToOpus: end after end/close');
      done = true;
      const r = await backend.end();
      transcodeSeconds += r.seconds;
      const data = muxer.end({ packets: r.packets, endGranule: r.endGranule });
      return { data: withHeader(data), mediaSeconds: report(r.endGranule) };
    },
    close() {
      if (done) return;
      done = true;
      backend.close();
    },
    get transcodeSeconds() {
      return transcodeSeconds;
    },
  };
}
