// A pipeline's output queue: units are re-chunked into upstream frames (Rechunker), which are then
// released no faster than the pace (Pacer).
import type { Unit } from './containers/index.js';
import { Pacer } from './pacer.js';
import { Rechunker, type Frame } from './rechunk.js';
import type { Scheduler } from './scheduler.js';

interface FrameQueueOptions {
  chunkMs: number;
  maxFrameBytes: number;
  pace: number;
  scheduler: Scheduler;
  /** A frame the re-chunker made: split (cut inside one unit), coalesced (more than one unit). */
  rechunked(split: boolean, coalesced: boolean): void;
  /** A frame is due: it goes out now. */
  emit(frame: Frame): void;
}

export class FrameQueue {
  private rechunker: Rechunker;
  private pacer: Pacer;

  constructor(o: FrameQueueOptions) {
    this.pacer = new Pacer({ pace: o.pace, scheduler: o.scheduler, emit: o.emit });
    this.rechunker = new Rechunker({
      chunkMs: o.chunkMs,
      maxFrameBytes: o.maxFrameBytes,
      scheduler: o.scheduler,
      emit: (f, split, coalesced) => {
        o.rechunked(split, coalesced);
        this.pacer.push(f);
      },
    });
  }

  /** Output bytes not yet sent: waiting to be re-chunked or paced. */
  get bufferedBytes(): number {
    return this.rechunker.bufferedBytes + this.pacer.bufferedBytes;
  }

  /** The stream's first bytes arrived now (the pace counts from here). */
  start(): void {
    this.pacer.start();
  }

  add(u: Unit): void {
    this.rechunker.add(u);
  }

  /** A batch of input (a client's message) ends here. */
  batchEnd(): void {
    this.rechunker.batchEnd();
  }

  /** Everything pending becomes frames; resolves when the pacer has sent them all. */
  flush(): Promise<void> {
    this.rechunker.flush();
    return this.pacer.idle();
  }

  /** Paced frames go out at once from now on. */
  hurry(): void {
    this.pacer.hurry();
  }

  /** Drops everything queued. */
  close(): void {
    this.rechunker.close();
    this.pacer.close();
  }
}
