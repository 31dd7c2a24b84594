// The audio path of one session: sniff → container parser → (transcoder) → re-chunker → pacer.
// Every stage sees the stream and either passes it on or stops it with one error. The counters are
// kept by PipelineStats, the output (re-chunker, pacer) is a FrameQueue.
import { echo, UPSTREAM_MAX_FRAME_BYTES } from '../protocol/index.js';
import { gatewayError, type ErrorId } from '../protocol/index.js';
import { logger } from '../telemetry/index.js';
import { metrics } from '../telemetry/index.js';
import { MalformedAudio, PcmParser, type ContainerParser, type Continuation, type Unit } from './containers/index.js';
import { Backlog } from './backlog.js';
import { FrameQueue } from './frame-queue.js';
import { PipelineStats } from './pipeline-stats.js';
import type { Frame } from './rechunk.js';
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
  private meter = new PipelineStats();
  private stopped = false;
  private sending: Promise<void> = Promise.resolve();
  /** client chunks until the container is known */
  private sniffed = new Backlog<Buffer>((b) => b.length);
  private container: Container | 'pcm' | undefined;
  private parser: ContainerParser | undefined;
  /** parsed units until the stream's headers decide the route */
  private held = new Backlog<Unit>((u) => u.bytes.length);
  private route: Route | undefined;
  private queue: FrameQueue;

  constructor(private o: AudioPipelineOptions) {
    this.queue = new FrameQueue({
      chunkMs: o.chunkMs,
      maxFrameBytes: o.maxFrameBytes ?? UPSTREAM_MAX_FRAME_BYTES,
      pace: o.pace,
      scheduler: schedulerFor(o.clock ?? realClock),
      rechunked: (split, coalesced) => this.meter.rechunked(split, coalesced),
      emit: (f) => this.emit(f),
    });
  }

  get stats(): AudioStats {
    return this.meter.stats;
  }

  /** Input bytes not yet forwarded: not yet parsed, held for the headers, or routed and queued (the
   * input behind the queued media; the queued bytes while there is no media time, only headers). */
  get bufferedBytes(): number {
    return (
      this.sniffed.bytes +
      (this.parser?.bufferedBytes ?? 0) +
      this.held.bytes +
      this.meter.queuedInputBytes(this.queue.bufferedBytes)
    );
  }

  push(chunk: Buffer): void {
    if (this.stopped) return;
    this.meter.input(chunk.length);
    if (chunk.length > 0) this.queue.start();
    const parser = this.parser;
    this.guard(() => {
      if (parser) this.accept(this.parse(parser, chunk));
      else {
        this.sniffed.push(chunk);
        this.start();
      }
      if (this.route) this.queue.batchEnd();
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
  sendHeld(final = true): Promise<void> {
    this.sending = this.sending.then(() => this.sendHeldNow(final));
    return this.sending;
  }

  private async sendHeldNow(final: boolean): Promise<void> {
    if (this.stopped) return;
    this.guard(() => {
      if (!this.parser && this.sniffed.bytes > 0) this.start();
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
    await this.queue.flush();
    if (this.queue.bufferedBytes === 0) this.meter.emptied();
  }

  hurry(): void {
    this.queue.hurry();
  }

  pauseInput(): void {
    const parser = this.parser;
    if (this.stopped || !parser?.pause) return;
    this.guard(() => {
      this.accept(this.parse(parser, undefined));
      if (this.route) this.queue.batchEnd();
    });
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
      if (this.route) this.queue.batchEnd();
    });
  }

  /** Input a parser dropped after a gap: in the stats, the metric and the log. */
  private countGap(parser: ContainerParser): void {
    const skipped = this.meter.gapTo(parser.gapBytes);
    if (skipped <= 0) return;
    metrics.resumeGapBytes.inc(skipped);
    logger.info(
      { skipped, container: this.container },
      'audio bytes skipped after a gap, to the next container boundary',
    );
  }

  discardQueued(): void {
    this.queue.close();
  }

  close(): void {
    this.stopped = true;
    this.route?.close();
    this.queue.close();
    this.sniffed.take();
    this.held.take();
  }

  /** Picks the parser once the first bytes say which container this is (else waits for more). */
  private start(): void {
    const sniffed = this.sniffed.items;
    const bytes = sniffed.length === 1 ? sniffed[0] : Buffer.concat(sniffed, this.sniffed.bytes);
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
      // Runs of half a frame: the re-chunker still cuts frames of about chunkMs between them.
      this.parser = createParser(r, { runSeconds: this.o.chunkMs / 2000, onPacket: this.o.onPacket });
    }
    this.sniffed.take();
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
      for (const u of units) this.held.push(u);
      const info = this.parser?.info;
      if (!info || !this.decide()) return;
      units = this.held.take();
    }
    for (const u of units) {
      if (this.stopped) return;
      this.meter.routed(u);
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
        if (!this.stopped) this.queue.add(this.o.onUnit?.(u, upstreamKind) ?? u);
      },
      batchEnd: () => {
        if (!this.stopped) this.queue.batchEnd();
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
      this.route = new OpusRemuxRoute(info, sink, this.o.onPacket);
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
      this.route = new PcmRoute(format, sink, (e) => this.failWith(e), this.o.onPacket);
    }
    logger.debug({ source: kind, passthrough }, 'audio source recognised');
    return true;
  }

  private emit(f: Frame): void {
    if (this.stopped) return;
    this.meter.output(f);
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
