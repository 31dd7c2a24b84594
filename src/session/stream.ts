// The client's audio stream as this replica holds it: its audio pipeline, the container headers it
// began with (what another replica parses the rest with), and where it stands on the client's
// timeline across replicas: the media received before this one, and which byte of the client's stream
// the parser's input starts at. A session taken over after a crash also counts here what its dead
// owner lost, once the restored stream shows where it goes on.
import {
  createAudioPipeline,
  type AudioPipeline,
  type AudioPlan,
  type PacketSink,
  type ReplayKind,
  type Unit,
} from '../audio/index.js';
import type { ErrorId } from '../protocol/index.js';
import { metrics, type Logger } from '../telemetry/index.js';
import { MAX_INIT_BYTES, type Restore, type SessionSnapshot } from './resume.js';

export interface StreamOptions {
  chunkMs: number;
  pace: number;
  maxBufferedBytes: number;
  log: Logger;
  /** a unit on its way upstream (the upstream link keeps it for a replay, and may rewrite it) */
  unit(u: Unit, kind: ReplayKind): Unit;
  /** a frame out of the pipeline, paced: upstream now */
  frame(frame: Buffer): void;
  /** an Opus packet as the parser reads it (the speech detector) */
  packet: PacketSink;
  failed(errorId: ErrorId, details: string): void;
}

/** Where the upstream link stands: what a snapshot and a resume point need of it. */
interface LinkPosition {
  resumePoint(): { at: number; behind: number } | undefined;
}

export class ClientStream {
  plan?: AudioPlan;
  pipeline?: AudioPipeline;
  private readonly init: Buffer[] = [];
  private initBytes = 0;
  /** media seconds received by the replicas this session was on before this one */
  private mediaBefore = 0;
  /** the parser's input byte n is the client's byte n + clientBytesBase, from clientBytesFrom on (a
   *  restored parser reads the record's headers and continuation first) */
  private clientBytesBase = 0;
  private clientBytesFrom = 0;
  /** taken over after a crash: the client's finals end here; the restored stream's first media after
   *  it is what the dead owner lost (counted once) */
  private lossFrom?: number;

  constructor(private readonly o: StreamOptions) {}

  start(): void {
    this.pipeline = createAudioPipeline({
      plan: this.plan ?? { mode: 'detect' },
      chunkMs: this.o.chunkMs,
      pace: this.o.pace,
      maxBufferedBytes: this.o.maxBufferedBytes,
      onUnit: (unit, kind) => {
        if (this.lossFrom !== undefined && unit.start !== undefined) this.countLoss(unit.start);
        if (unit.header && this.initBytes <= MAX_INIT_BYTES) {
          this.init.push(unit.bytes);
          this.initBytes += unit.bytes.length;
        }
        return this.o.unit(unit, kind);
      },
      onFrame: (frame) => this.o.frame(frame),
      onPacket: this.o.packet,
      onError: (err) => this.o.failed(err.id, err.details),
    });
  }

  /** Taken over: the pipeline parses the record's container headers (and, after a handover, the open
   * Cluster's head) first, then goes on with the client's bytes from `bytesIn`, checking that they do
   * continue (else it skips to the next boundary). */
  restore(r: Restore, bytesIn: number, mediaBefore: number): void {
    this.mediaBefore = mediaBefore;
    this.clientBytesFrom = bytesIn;
    this.clientBytesBase = bytesIn - r.init.length - (r.continuation?.bytes.length ?? 0);
    this.start();
    this.pipeline!.push(r.init);
    if (r.continuation) this.pipeline!.push(r.continuation.bytes);
    this.pipeline!.gap(r.continuation?.expect);
    if (r.crash) this.lossFrom = r.finalUntil;
  }

  /** Media seconds of the client's audio received, over every replica the session was on. */
  get mediaReceived(): number {
    return this.mediaBefore + (this.pipeline?.stats.mediaSecondsIn ?? 0);
  }

  /** The container kind another replica can go on with, and its headers; undefined while there is none
   * (no media yet, or a stream only this replica can parse: transcoded, MP3...). */
  handable(): { kind: 'webm' | 'ogg'; init: Buffer } | undefined {
    const source = this.pipeline?.stats.source;
    const kind = source?.startsWith('webm-') ? 'webm' : source?.startsWith('ogg-') ? 'ogg' : undefined;
    if (!kind || source === 'webm-pcm' || this.initBytes === 0 || this.initBytes > MAX_INIT_BYTES) return undefined;
    return { kind, init: Buffer.concat(this.init) };
  }

  /** See SessionSnapshot.resume: where the replay's oldest Cluster or page starts in the client's stream. */
  resumePoint(link: LinkPosition | undefined, bytesIn: number): SessionSnapshot['resume'] {
    const p = link?.resumePoint();
    if (!p) return undefined;
    const audioBytes = this.clientBytesBase + p.at;
    if (audioBytes < this.clientBytesFrom || audioBytes > bytesIn) return undefined;
    return { audioBytes, mediaReceived: Math.max(this.mediaBefore, this.mediaReceived - p.behind) };
  }

  /** What a successor's parser needs to go on mid-container (bounded), see AudioPipeline.continuation. */
  continuation(): SessionSnapshot['continuation'] {
    const c = this.pipeline?.continuation();
    return c && c.bytes.length <= MAX_INIT_BYTES ? c : undefined;
  }

  /** After a crash takeover, the restored stream's first media: what lies between the client's last
   * final and it is what the dead owner lost (its received, unfinalised audio, and what the client
   * did not resend). */
  private countLoss(start: number): void {
    const lost = Math.max(0, start - this.lossFrom!);
    this.lossFrom = undefined;
    if (lost > 0) metrics.takeoverLostMedia.inc(lost);
    this.o.log.info(
      { event: 'takeover_lost_media', lostMediaSeconds: Number(lost.toFixed(3)) },
      'media lost with the dead replica',
    );
  }
}
