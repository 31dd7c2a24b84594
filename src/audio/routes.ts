// Where a recognised stream's units go: straight to the re-chunker (passthrough), or through the
// transcoder, whose Ogg/Opus output is parsed into pages and re-chunked like passthrough audio.
import { performance } from 'node:perf_hooks';
import { MalformedAudio, OggParser, type PacketSink, type TrackInfo, type Unit } from './containers/index.js';
import {
  createOggOpusMuxer,
  createPcmToOpus,
  type PcmFormat,
  type PcmToOpus,
  type OggOpusMuxer,
} from './transcode/index.js';

export interface Route {
  unit(u: Unit): void;
  /** End of input: push out everything (the transcoder's tail included). */
  finish(): Promise<void>;
  /** Mid-stream: wait until what was handed in so far has come out (no stream end). */
  settle(): Promise<void>;
  readonly transcodeSeconds: number;
  /** Abandoned session: release what the route holds (a transcoder's worker-side encoder). */
  close(): void;
}

/** Where a route's units go; batchEnd: no more until later input (the re-chunker may send a partial frame). */
export interface Sink {
  unit(u: Unit): void;
  batchEnd(): void;
}

export class PassRoute implements Route {
  readonly transcodeSeconds = 0;
  close(): void {}
  constructor(private sink: Sink) {}
  unit(u: Unit): void {
    this.sink.unit(u);
  }
  async finish(): Promise<void> {}
  async settle(): Promise<void> {}
}

/** PCM (WAV, raw, WebM/PCM) → Opus encoder → Ogg pages. Encoder calls run one at a time, on one
 * promise chain. finish() ends the encoder (tail + EOS page); PCM after that (audio after a client
 * flush) starts a fresh encoder, i.e. a chained Ogg stream. */
export class PcmRoute implements Route {
  private enc: PcmToOpus | undefined;
  private ended = 0; // CPU seconds of encoders already ended
  private readonly ogg: OggParser;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private chain: Promise<void> = Promise.resolve();
  private scheduled = false;

  /** `onPacket`: the encoder's Opus packets, as its Ogg pages are read (the speech detector) */
  constructor(
    private format: PcmFormat,
    private sink: Sink,
    private fail: (e: unknown) => void,
    onPacket?: PacketSink,
  ) {
    this.ogg = new OggParser(onPacket);
  }

  get transcodeSeconds(): number {
    return this.ended + (this.enc?.transcodeSeconds ?? 0);
  }
  close(): void {
    this.enc?.close();
    this.enc = undefined;
  }

  unit(u: Unit): void {
    for (const p of u.payload ?? []) {
      this.pending.push(p);
      this.pendingBytes += p.length;
    }
    if (this.pendingBytes > 0 && !this.scheduled) {
      this.scheduled = true;
      this.chain = this.chain.then(() => this.encodePending()).catch(this.fail);
    }
  }

  settle(): Promise<void> {
    return this.chain;
  }

  finish(): Promise<void> {
    const done = this.chain.then(async () => {
      await this.encodePending();
      const enc = this.enc;
      if (!enc) return;
      this.enc = undefined;
      const tail = await enc.end();
      this.ended += enc.transcodeSeconds;
      this.out(tail.data);
    });
    this.chain = done.catch(() => {});
    return done;
  }

  private async encodePending(): Promise<void> {
    this.scheduled = false;
    while (this.pendingBytes > 0) {
      const pcm = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
      this.enc ??= createPcmToOpus(this.format);
      const r = await this.enc.push(pcm);
      this.out(r.data);
    }
  }

  private out(data: Buffer): void {
    if (data.length === 0) return;
    for (const u of this.ogg.push(data)) this.sink.unit(u);
    this.sink.batchEnd(); // the encoder's output comes after the client's message that fed it
  }
}

/** The muxer refuses a packet it cannot time (empty, over 120 ms): the client's MP4 is malformed. */
function remux(mux: OggOpusMuxer, packets: Buffer[]): Buffer {
  try {
    return mux.write(packets).data;
  } catch (e) {
    if (e instanceof RangeError) throw new MalformedAudio(`MP4/Opus sample: ${e.message}`);
    throw e;
  }
}

/** Opus packets from MP4 → Ogg pages, no re-encoding. */
export class OpusRemuxRoute implements Route {
  transcodeSeconds = 0;
  close(): void {}
  private mux: OggOpusMuxer | undefined;
  private readonly ogg: OggParser;

  /** `onPacket`: the stream's Opus packets as they are muxed (the speech detector) */
  constructor(
    private info: TrackInfo,
    private sink: Sink,
    onPacket?: PacketSink,
  ) {
    this.ogg = new OggParser(onPacket);
  }

  unit(u: Unit): void {
    if (!u.payload?.length) return;
    let head: Buffer | undefined;
    if (!this.mux) {
      const mux = this.timed(() =>
        createOggOpusMuxer({
          channels: this.info.channels ?? 1,
          inputSampleRate: this.info.inputSampleRate ?? 48000,
          preSkip: this.info.preSkip,
        }),
      );
      this.mux = mux;
      head = this.timed(() => mux.header());
    }
    const mux = this.mux;
    const body = this.timed(() => remux(mux, u.payload as Buffer[]));
    if (head) this.out(head);
    this.out(body);
  }

  async settle(): Promise<void> {}

  /** Ends the Ogg stream; packets after it (audio after a client flush) start a new chained one. */
  async finish(): Promise<void> {
    const mux = this.mux;
    this.mux = undefined;
    if (mux) this.out(this.timed(() => mux.end()));
  }

  private timed<T>(fn: () => T): T {
    const t = performance.now();
    try {
      return fn();
    } finally {
      this.transcodeSeconds += (performance.now() - t) / 1000;
    }
  }

  private out(data: Buffer): void {
    if (data.length) for (const u of this.ogg.push(data)) this.sink.unit(u);
  }
}
