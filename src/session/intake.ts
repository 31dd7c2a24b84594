// Client audio and flush/end on their way upstream, in the client's order. Frames are copied into
// the inbox; audio goes into the pipeline at once unless a flush/end waits for the pipeline to send what it holds
// what came before it, in which case what follows waits behind it (a flush, audio, then end: that
// audio goes upstream before the end). Client flushes are coalesced (FlushGate). Everything the
// session holds of the client's audio counts against one bound.
import type { AudioPipeline } from '../audio/index.js';
import { errorMessage } from '../protocol/index.js';
import { metrics } from '../telemetry/index.js';
import { FlushGate, MAX_UNANSWERED_FLUSHES } from './flushes.js';
import { AudioInbox } from './inbox.js';

export type Control = { type: 'flush' | 'end' };

/** Held audio pieces smaller than this are joined: a client alternating tiny audio and text frames
 * cannot make the held queue one object per byte. */
const JOIN_BELOW_BYTES = 1024;
/** The held queue yields to the event loop after this many pieces, so no client stalls the process. */
const YIELD_EVERY = 256;

const CLIENT_TO_UPSTREAM = metrics.forwardLatency.labels('client_to_upstream');

export interface IntakeDeps {
  maxBufferedBytes: number;
  pipeline(): AudioPipeline | undefined;
  /** the session is over: nothing more goes upstream */
  over(): boolean;
  /** a piece or batch out of the inbox, for the session to forward (or refuse) */
  deliver(audio: Buffer): void;
  /** a flush/end whose audio before it went out */
  sendControl(message: Control): void;
  /** the pipeline failed while the queue emptied it */
  failed(details: string): void;
  /** a message to the client (flush answers and refusals) */
  tell(text: string): void;
}

export class AudioIntake {
  private readonly inbox: AudioInbox;
  private ordered: Array<Buffer | Control> = [];
  private orderedBytes = 0;
  private ordering = false;
  /** arrival time of the oldest client audio not yet sent upstream (re-chunking + pacing delay) */
  private oldestUnsentAt?: number;
  /** audio bytes received from the client, over every socket and replica of the session */
  bytesIn = 0;
  readonly flushes: FlushGate;

  constructor(private readonly d: IntakeDeps) {
    this.inbox = new AudioInbox(d.deliver);
    this.flushes = new FlushGate({
      sendUpstream: () => this.inOrder({ type: 'flush' }),
      answer: () => {
        d.tell('{"type":"flushed"}');
        d.tell('{"type":"delta_usage","credits":0}');
      },
      refuse: () =>
        d.tell(
          JSON.stringify(
            errorMessage(
              'TOO_MANY_FLUSHES',
              `${MAX_UNANSWERED_FLUSHES} flushes are waiting for the speech service's answer; flushes are refused until it comes`,
            ),
          ),
        ),
    });
  }

  /** Client audio received and not yet sent upstream: batched, held behind a flush/end, in the pipeline. */
  get bufferedBytes(): number {
    return this.inbox.bufferedBytes + this.orderedBytes + (this.d.pipeline()?.bufferedBytes ?? 0);
  }

  /** The one bound on held audio: a frame of `bytes` more would go over it. */
  wouldOverrun(bytes: number): string | undefined {
    const max = this.d.maxBufferedBytes;
    if (this.bufferedBytes + bytes <= max) return undefined;
    return `more than ${max} bytes of audio waiting to be forwarded; send audio at real time`;
  }

  /** `frame` is uWS's buffer, valid only during its callback: the inbox copies it. */
  add(frame: ArrayBuffer): void {
    this.bytesIn += frame.byteLength;
    this.inbox.add(frame);
  }

  /** Audio batched so far goes on now (before a text message, so order is kept). */
  flushInbox(): void {
    this.inbox.flush();
  }

  /** Audio the session forwards: into the pipeline, or behind a waiting flush/end. */
  forward(audio: Buffer): void {
    this.oldestUnsentAt ??= performance.now();
    this.flushes.audio();
    const pipeline = this.d.pipeline();
    if (!this.ordering) return pipeline?.push(audio);
    this.orderedBytes += audio.length;
    const last = this.ordered.at(-1);
    if (Buffer.isBuffer(last) && last.length < JOIN_BELOW_BYTES)
      this.ordered[this.ordered.length - 1] = Buffer.concat([last, audio]);
    else this.ordered.push(audio);
  }

  /** A frame went upstream: the client-to-upstream delay of the audio in it is observed. */
  sent(): void {
    if (this.oldestUnsentAt === undefined) return;
    CLIENT_TO_UPSTREAM.observe((performance.now() - this.oldestUnsentAt) / 1000);
    this.oldestUnsentAt = undefined;
  }

  /** The client's `end`: answers still owed to its flushes go first, then `end` in its place. */
  end(): void {
    this.flushes.beforeEnd();
    this.inOrder({ type: 'end' });
  }

  /** Nothing more of this stream goes upstream; a flush/end still waiting goes out. */
  drop(): void {
    this.inbox.clear();
    this.ordered = this.ordered.filter((item) => !Buffer.isBuffer(item));
    this.orderedBytes = 0;
    this.d.pipeline()?.close();
  }

  /** flush/end keep their place in the stream: the upstream's answer to `end` is awaited from when
   * `end` is sent, not from when the client asked, so audio still being paced out is not cut short. */
  private inOrder(message: Control): void {
    this.ordered.push(message);
    if (!this.ordering) void this.sendInOrder();
  }

  private async sendInOrder(): Promise<void> {
    this.ordering = true;
    try {
      for (let n = 1; this.ordered.length > 0 && !this.d.over(); n++) {
        if (n % YIELD_EVERY === 0) await new Promise(setImmediate);
        const item = this.ordered.shift()!;
        if (Buffer.isBuffer(item)) {
          this.orderedBytes -= item.length;
          this.d.pipeline()?.push(item);
          continue;
        }
        await this.d.pipeline()?.sendHeld(item.type === 'end'); // a flush keeps a transcoded stream going
        if (!this.d.over()) this.d.sendControl(item);
      }
    } catch (err) {
      this.d.failed((err as Error).message);
    } finally {
      this.ordering = false;
    }
  }
}
