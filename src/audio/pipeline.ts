// The audio path of one session: sniff → container parser → (transcoder) → re-chunker → pacer.
// Every stage sees the stream and either passes it on or stops it with one error.
import { echo, UPSTREAM_MAX_FRAME_BYTES } from '../protocol/index.js';
import { gatewayError, type ErrorId } from '../protocol/index.js';
import { logger } from '../telemetry/index.js';
import { metrics } from '../telemetry/index.js';
import { MalformedAudio, PcmParser, type ContainerParser, type Continuation, type Unit } from './containers/index.js';
import { Pacer } from './pacer.js';
import { Rechunker, type Frame } from './rechunk.js';
import { OpusRemuxRoute, PassRoute, PcmRoute, type Route, type Sink } from './routes.js';
import { schedulerFor } from './scheduler.js';
import { sniff, SNIFF_BYTES, type Container } from './sniff.js';
import { CONTAINER_LABEL, createParser, sourceKind } from './source.js';
import { assertPcmFormat, type PcmFormat } from './transcode/index.js';
import {
  KIND_LABEL,
  PASSTHROUGH_KINDS,
  type AudioPipeline,
  type AudioPipelineOptions,
  type AudioStats,
  type Clock,
} from './types.js';

const realClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

class Pipeline implements AudioPipeline {
  readonly stats: AudioStats = {
    bytesIn: 0,
    bytesOut: 0,
    mediaSecondsIn: 0,
    mediaSecondsOut: 0,
    framesIn: 0,
    framesOut: 0,
    framesSplit: 0,
    framesCoalesced: 0,
    transcodeSeconds: 0,
    gapBytes: 0,
  };
  private stopped = false;
  private draining: Promise<void> = Promise.resolve();
  private sniffed: Buffer[] = [];
  private sniffedBytes = 0;
  private container: Container | 'pcm' | undefined;
  private parser: ContainerParser | undefined;
  private held: Unit[] = [];
  private heldBytes = 0;
  private route: Route | undefined;
  private mediaOrigin: number | undefined;
  private outOrigin: number | undefined;
  /** Input bytes of the units handed to the route, and media seconds in/out when the last drain
   * emptied the pipeline (from there on, media in minus media out is what is still queued). */
  private routedBytes = 0;
  private inMark = 0;
  private outMark = 0;
  private rechunker: Rechunker;
  private pacer: Pacer;

  constructor(private o: AudioPipelineOptions) {
    const scheduler = schedulerFor(o.clock ?? realClock);
    const maxFrameBytes = o.maxFrameBytes ?? UPSTREAM_MAX_FRAME_BYTES;
    this.pacer = new Pacer({ pace: o.pace, scheduler, emit: (f) => this.emit(f) });
    this.rechunker = new Rechunker({
      chunkMs: o.chunkMs,
      maxFrameBytes,
      scheduler,
      emit: (f, split, coalesced) => {
        if (split) this.stats.framesSplit++;
        if (coalesced) this.stats.framesCoalesced++;
        this.pacer.push(f);
      },
    });
  }

  /** Input bytes not yet forwarded: not yet parsed, held for the headers, or routed and queued. */
  get bufferedBytes(): number {
    return this.sniffedBytes + (this.parser?.bufferedBytes ?? 0) + this.heldBytes + this.queuedInputBytes();
  }

  /** The input behind the media routed but not yet sent: queued media seconds × the stream's input
   * bytes a media second. Not the queued bytes themselves: a transcoder's Opus is ~20× smaller than
   * its PCM, so counting output would let a client run ~20× further ahead of real time. */
  private queuedInputBytes(): number {
    const { mediaSecondsIn, mediaSecondsOut } = this.stats;
    if (mediaSecondsIn <= 0) return this.rechunker.bufferedBytes + this.pacer.bufferedBytes; // untimed: headers
    const queued = Math.max(0, mediaSecondsIn - this.inMark - (mediaSecondsOut - this.outMark));
    return Math.ceil((queued * this.routedBytes) / mediaSecondsIn);
  }

  push(chunk: Buffer): void {
    if (this.stopped) return;
    this.stats.framesIn++;
    this.stats.bytesIn += chunk.length;
    if (chunk.length > 0) this.pacer.start();
    const parser = this.parser;
    this.guard(() => {
      if (parser) this.accept(this.parse(parser, chunk));
      else {
        this.sniffed.push(chunk);
        this.sniffedBytes += chunk.length;
        this.start();
      }
      if (this.route) this.rechunker.batchEnd();
    });
    if (!this.stopped && this.bufferedBytes > this.o.maxBufferedBytes) {
      this.fail(
        'AUDIO_BUFFER_OVERRUN',
        `more than ${this.o.maxBufferedBytes} bytes of audio waiting to be forwarded; send audio at real time`,
      );
    }
  }

  /** Flush or end (client `flush`/`end`): everything buffered goes out, paced; resolves when the
   * last frame has been passed to onFrame. A flush (`final` false) keeps the transcoder's stream
   * going (only a partial 20 ms frame waits for more audio); an end finishes it (tail, EOS), and
   * audio after that would start a chained Ogg stream. Calls run one after another. */
  drain(final = true): Promise<void> {
    this.draining = this.draining.then(() => this.drainNow(final));
    return this.draining;
  }

  private async drainNow(final: boolean): Promise<void> {
    if (this.stopped) return;
    this.guard(() => {
      if (!this.parser && this.sniffedBytes > 0) this.start();
      if (this.parser?.pause) this.accept(this.parse(this.parser, undefined));
    });
    if (this.stopped || !this.route) return; // headers not complete yet: nothing can go out
    try {
      await (final ? this.route.finish() : this.route.settle());
    } catch (e) {
      this.failWith(e);
    }
    if (this.stopped) return;
    this.stats.transcodeSeconds = this.route.transcodeSeconds;
    this.rechunker.flush();
    await this.pacer.idle();
    if (this.rechunker.bufferedBytes === 0 && this.pacer.bufferedBytes === 0) {
      // All routed media has gone out; a transcoder's padded tail may have put its output ahead.
      this.inMark = this.stats.mediaSecondsIn;
      this.outMark = this.stats.mediaSecondsOut;
    }
  }

  hurry(): void {
    this.pacer.hurry();
  }

  continuation(): Continuation | undefined {
    return this.stopped ? undefined : this.parser?.continuation?.();
  }

  /** Before the container is known (still sniffing) there is nothing to verify against: bytes
   * lost that early fail the stream with an answer about its bytes. */
  gap(expect?: Continuation['expect']): void {
    if (this.stopped || !this.parser) return;
    const parser = this.parser;
    this.guard(() => {
      const whole = parser.gap(expect);
      this.countGap(parser);
      this.accept(whole);
      if (this.route) this.rechunker.batchEnd();
    });
  }

  /** Input a parser dropped after a gap: in the stats, the metric and the log. */
  private countGap(parser: ContainerParser): void {
    const skipped = parser.gapBytes - this.stats.gapBytes;
    if (skipped <= 0) return;
    this.stats.gapBytes = parser.gapBytes;
    metrics.resumeGapBytes.inc(skipped);
    logger.info(
      { skipped, container: this.container },
      'audio bytes skipped after a gap, to the next container boundary',
    );
  }

  discardQueued(): void {
    this.rechunker.close();
    this.pacer.close();
  }

  close(): void {
    this.stopped = true;
    this.route?.close();
    this.rechunker.close();
    this.pacer.close();
    this.sniffed = [];
    this.sniffedBytes = 0;
    this.held = [];
    this.heldBytes = 0;
  }

  /** Picks the parser once the first bytes say which container this is (else waits for more). */
  private start(): void {
    const bytes = this.sniffed.length === 1 ? this.sniffed[0] : Buffer.concat(this.sniffed, this.sniffedBytes);
    let r = sniff(bytes.subarray(0, SNIFF_BYTES));
    const plan = this.o.plan;
    // Samples can look like an MPEG frame sync by chance; only an ID3 tag marks MP3 under PCM.
    if (plan.pcm && r === 'mp3' && bytes.toString('latin1', 0, 3) !== 'ID3') r = 'unknown';
    if (plan.pcm) {
      // Raw PCM can't be sniffed; but container magic under a PCM declaration is a mismatch.
      if (r === 'more') return;
      if (r !== 'unknown') {
        this.mismatch(`a ${r.toUpperCase()} container`);
        return;
      }
      this.container = 'pcm';
      this.parser = new PcmParser(plan.pcm);
    } else {
      if (r === 'more') return;
      if (r === 'unknown') {
        this.fail(
          'AUDIO_UNRECOGNIZED',
          plan.declared
            ? `declared ${echo(plan.declared)} but the bytes are no audio format the gateway knows`
            : 'the bytes are no audio format the gateway knows',
        );
        return;
      }
      this.container = r;
      this.parser = createParser(r);
    }
    this.sniffed = [];
    this.sniffedBytes = 0;
    this.accept(this.parse(this.parser, bytes));
  }

  /** Runs the parser over client bytes (none: the input pauses); whatever it throws, the client's
   * stream is malformed. */
  private parse(parser: ContainerParser, chunk: Buffer | undefined): Unit[] {
    try {
      const units = chunk ? parser.push(chunk) : (parser.pause?.() ?? []);
      this.countGap(parser);
      return units;
    } catch (e) {
      if (e instanceof MalformedAudio) this.fail('AUDIO_MALFORMED', e.message);
      else {
        // A check missing in a parser; the answer is still about the client's bytes.
        logger.error({ err: e, container: this.container }, 'audio parser failed on client bytes');
        const label = this.container === 'pcm' || !this.container ? 'audio' : CONTAINER_LABEL[this.container];
        this.fail(
          'AUDIO_MALFORMED',
          `the ${label} stream could not be parsed (in its first ${this.stats.bytesIn} bytes)`,
        );
      }
      return [];
    }
  }

  private accept(units: Unit[]): void {
    if (this.stopped) return;
    if (!this.route) {
      for (const u of units) {
        this.held.push(u);
        this.heldBytes += u.bytes.length;
      }
      const info = this.parser?.info;
      if (!info || !this.decide()) return;
      units = this.held;
      this.held = [];
      this.heldBytes = 0;
    }
    for (const u of units) {
      if (this.stopped) return;
      if (u.end !== undefined) {
        this.mediaOrigin ??= u.start ?? 0;
        this.stats.mediaSecondsIn = Math.max(this.stats.mediaSecondsIn, u.end - this.mediaOrigin);
      }
      this.routedBytes += u.bytes.length;
      (this.route as Route).unit(u);
      this.stats.transcodeSeconds = (this.route as Route).transcodeSeconds;
    }
  }

  /** Checks the stream against the declaration and sets the route; false when it failed. */
  private decide(): boolean {
    const info = this.parser?.info;
    if (!info || !this.container) return false;
    const plan = this.o.plan;
    const { kind, label } = sourceKind(this.container, info);
    if (!kind) {
      if (this.container === 'wav')
        this.fail('AUDIO_UNRECOGNIZED', `${label}: the gateway takes WAV with 16-bit integer or 32-bit float PCM`);
      else if (plan.declared) this.mismatch(label);
      else this.fail('AUDIO_UNRECOGNIZED', `the stream is ${label}, which the gateway does not take`);
      return false;
    }
    if (plan.expect && !plan.expect.includes(kind)) {
      this.mismatch(KIND_LABEL[kind]);
      return false;
    }
    this.stats.source = kind;
    const passthrough = plan.mode === 'passthrough' || (plan.mode === 'detect' && PASSTHROUGH_KINDS.has(kind));
    // What goes upstream is the client's container when passed through, else the gateway's Ogg/Opus.
    const upstreamKind = !passthrough
      ? 'ogg'
      : this.container === 'webm' || this.container === 'ogg'
        ? this.container
        : 'other';
    const sink: Sink = {
      unit: (u) => {
        if (!this.stopped) this.rechunker.add(this.o.onUnit?.(u, upstreamKind) ?? u);
      },
      batchEnd: () => {
        if (!this.stopped) this.rechunker.batchEnd();
      },
    };
    if (passthrough) this.route = new PassRoute(sink);
    else if (kind === 'mp4-opus') {
      if (info.channels !== 1 && info.channels !== 2) {
        this.fail(
          'AUDIO_UNRECOGNIZED',
          `MP4/Opus with ${info.channels} channels cannot be remuxed (mono or stereo only)`,
        );
        return false;
      }
      this.route = new OpusRemuxRoute(info, sink);
    } else {
      const encoding = plan.pcm?.encoding ?? (info.codec === 'pcm-f32' ? 'f32le' : 's16le');
      const format: PcmFormat = {
        sampleRate: Math.round(info.sampleRate ?? 0),
        channels: info.channels ?? 0,
        encoding,
      };
      try {
        assertPcmFormat(format);
      } catch (e) {
        this.fail('AUDIO_UNRECOGNIZED', `${KIND_LABEL[kind]} cannot be transcoded: ${(e as Error).message}`);
        return false;
      }
      this.route = new PcmRoute(format, sink, (e) => this.failWith(e));
    }
    logger.debug({ source: kind, passthrough }, 'audio source recognised');
    return true;
  }

  private emit(f: Frame): void {
    if (this.stopped) return;
    this.outOrigin ??= f.start;
    this.stats.framesOut++;
    this.stats.bytesOut += f.bytes.length;
    this.stats.mediaSecondsOut = Math.max(this.stats.mediaSecondsOut, f.end - this.outOrigin);
    // Paced frames go out from the shared timer: a failure there ends this session only.
    try {
      this.o.onFrame(f.bytes);
    } catch (e) {
      this.failWith(e);
    }
  }

  private mismatch(what: string): void {
    this.fail('AUDIO_FORMAT_MISMATCH', `declared ${echo(this.o.plan.declared ?? '')} but the stream is ${what}`);
  }

  private guard(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.failWith(e);
    }
  }

  private failWith(e: unknown): void {
    if (e instanceof MalformedAudio) this.fail('AUDIO_MALFORMED', e.message);
    else {
      logger.error({ err: e }, 'audio pipeline failed');
      this.fail('INTERNAL', 'the audio pipeline failed');
    }
  }

  private fail(id: ErrorId, details: string): void {
    if (this.stopped) return;
    this.close();
    this.o.onError(gatewayError(id, details));
  }
}

export function createAudioPipeline(o: AudioPipelineOptions): AudioPipeline {
  return new Pipeline(o);
}
