// One pipeline's counters (AudioStats) and the media-time marks behind them: where the input's and
// the output's media time start, and how much input stands behind the media still queued.
import type { Unit } from './containers/index.js';
import type { Frame } from './rechunk.js';
import type { AudioStats } from './types.js';

export class PipelineStats {
  readonly stats: AudioStats = {
    bytesIn: 0,
    bytesOut: 0,
    mediaSecondsIn: 0,
    mediaSecondsOut: 0,
    outUntil: 0,
    framesIn: 0,
    framesOut: 0,
    framesSplit: 0,
    framesCoalesced: 0,
    transcodeSeconds: 0,
    gapBytes: 0,
  };
  private mediaOrigin: number | undefined;
  private outOrigin: number | undefined;
  /** Input bytes of the units handed to the route, and media seconds in/out when the pipeline last emptied
   * emptied the pipeline (from there on, media in minus media out is what is still queued). */
  private routedBytes = 0;
  private inMark = 0;
  private outMark = 0;

  /** A client chunk came in. */
  input(bytes: number): void {
    this.stats.framesIn++;
    this.stats.bytesIn += bytes;
  }

  /** A unit went to the route. */
  routed(u: Unit): void {
    if (u.end !== undefined) {
      this.mediaOrigin ??= u.start ?? 0;
      this.stats.mediaSecondsIn = Math.max(this.stats.mediaSecondsIn, u.end - this.mediaOrigin);
    }
    this.routedBytes += u.bytes.length;
  }

  /** The re-chunker made a frame: split (cut inside one unit), coalesced (more than one unit). */
  rechunked(split: boolean, coalesced: boolean): void {
    if (split) this.stats.framesSplit++;
    if (coalesced) this.stats.framesCoalesced++;
  }

  /** A frame went out. */
  output(f: Frame): void {
    this.outOrigin ??= f.start;
    this.stats.framesOut++;
    this.stats.bytesOut += f.bytes.length;
    this.stats.mediaSecondsOut = Math.max(this.stats.mediaSecondsOut, f.end - this.outOrigin);
    this.stats.outUntil = Math.max(this.stats.outUntil, f.end);
  }

  /** A parser has skipped `total` bytes after gaps so far: the bytes skipped since the last count. */
  gapTo(total: number): number {
    const skipped = total - this.stats.gapBytes;
    if (skipped > 0) this.stats.gapBytes = total;
    return skipped;
  }

  /** All routed media has gone out; a transcoder's padded tail may have put its output ahead. */
  emptied(): void {
    this.inMark = this.stats.mediaSecondsIn;
    this.outMark = this.stats.mediaSecondsOut;
  }

  /** The input behind the media routed but not yet sent: queued media seconds × the stream's input
   * bytes a media second. Not the queued bytes themselves: a transcoder's Opus is ~20× smaller than
   * its PCM, so counting output would let a client run ~20× further ahead of real time. Before any
   * media time (headers only), the bytes queued: `untimedBytes`. */
  queuedInputBytes(untimedBytes: number): number {
    const { mediaSecondsIn, mediaSecondsOut } = this.stats;
    if (mediaSecondsIn <= 0) return untimedBytes;
    const queued = Math.max(0, mediaSecondsIn - this.inMark - (mediaSecondsOut - this.outMark));
    return Math.ceil((queued * this.routedBytes) / mediaSecondsIn);
  }
}
