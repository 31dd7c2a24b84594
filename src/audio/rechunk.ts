// Container units → upstream frames: the first frame holds the complete headers, frames stay
// within maxFrameBytes, cut at unit boundaries where possible, coalesced to about chunkMs of media.
// Everything complete goes at the end of a batch of input (a client's message) once it holds half
// of chunkMs: a real-time client's piece goes upstream when it arrives, while tiny pieces still
// coalesce. A short batch after one of half of chunkMs goes too: that client's pieces make frames
// on their own, and its short one (a recorder's last) would wait a whole piece interval for nothing.
// A frame cut within a batch waits for the batch's end, so that a short tail joins it rather than
// going alone or waiting for the next piece. A partial frame waits at most chunkMs.
import type { Unit } from './containers/index.js';
import { Alarm, type Scheduler } from './scheduler.js';

export interface Frame {
  bytes: Buffer;
  start: number;
  end: number;
}

export interface RechunkerOptions {
  chunkMs: number;
  maxFrameBytes: number;
  scheduler: Scheduler;
  /** split: cut inside one unit; coalesced: carries more than one unit. */
  emit(frame: Frame, split: boolean, coalesced: boolean): void;
}

/** The parts as one buffer: a view when they lie end to end in memory (the units of one client
 * message, the usual case: a browser piece is one WebM Cluster), else a copy. Same bytes either way;
 * units are never written to after they are made. */
function joined(parts: Buffer[], bytes: number): Buffer {
  const first = parts[0];
  let next = first.byteOffset + first.length;
  for (let i = 1; i < parts.length; i++) {
    if (parts[i].buffer !== first.buffer || parts[i].byteOffset !== next) return Buffer.concat(parts, bytes);
    next += parts[i].length;
  }
  return Buffer.from(first.buffer, first.byteOffset, bytes);
}

/** A frame cut and not yet emitted: its parts are joined only when it goes (a tail may join it). */
interface ReadyFrame {
  parts: Buffer[];
  bytes: number;
  start: number;
  end: number;
  coalesced: boolean;
}

export class Rechunker {
  private parts: Buffer[] = [];
  private units = 0;
  private bytes = 0;
  private start: number | undefined; // media start of the pending frame
  private end: number | undefined;
  private cursor = 0; // media time emitted so far
  private headerDone = false;
  private since = 0; // clock time the pending frame's first bytes came
  private alarm: Alarm;
  /** The frame cut in this batch, if any. */
  private ready: ReadyFrame | undefined;
  private batchFrom: number | undefined; // media of this batch's units
  private batchTo = 0;
  /** The last batch with media held half of chunkMs or more. */
  private bigPieces = false;

  constructor(private o: RechunkerOptions) {
    this.alarm = new Alarm(o.scheduler, () => this.flush());
  }

  get bufferedBytes(): number {
    return this.bytes + (this.ready?.bytes ?? 0);
  }

  add(u: Unit): void {
    if (!u.header && !this.headerDone) {
      this.headerDone = true; // the pending bytes are now the complete headers
      this.since = this.o.scheduler.clock.now(); // media may start long after them
    }
    if (this.headerDone && this.bytes > 0) {
      if (this.bytes + u.bytes.length > this.o.maxFrameBytes) this.cut();
      else if (u.end !== undefined && u.start !== undefined && this.start !== undefined && this.end !== undefined) {
        // Stop before a unit that takes the frame further from chunkMs than it is now.
        const target = this.o.chunkMs / 1000;
        const now = this.end - this.start,
          next = u.end - this.start;
        if (Math.abs(next - target) > Math.abs(now - target) && now > 0) this.cut();
      }
    }
    if (this.bytes === 0) this.since = this.o.scheduler.clock.now();
    this.parts.push(u.bytes);
    this.units++;
    this.bytes += u.bytes.length;
    if (u.start !== undefined && this.start === undefined) this.start = u.start;
    if (u.end !== undefined) this.end = Math.max(this.end ?? u.end, u.end);
    this.noteBatch(u);
    while (this.bytes > this.o.maxFrameBytes) this.splitHead();
    if (this.headerDone && this.media() >= this.o.chunkMs / 1000) this.cut();
  }

  /** A batch of input ends here (no more units until the next client message): the pending frame
   * goes if it holds half of chunkMs or the batch before did, else it waits for more until chunkMs
   * after its first bytes. */
  batchEnd(): void {
    const afterBig = this.endBatch();
    const ready = this.ready;
    if (
      ready &&
      this.bytes > 0 &&
      this.media() < this.o.chunkMs / 2000 &&
      ready.bytes + this.bytes <= this.o.maxFrameBytes
    ) {
      // A short tail joins the frame cut before it.
      this.parts = ready.parts.concat(this.parts);
      this.bytes += ready.bytes;
      this.units++; // the ready frame's units: the merged frame is coalesced
      this.start = ready.start;
      this.end = Math.max(this.end ?? ready.end, ready.end);
      this.ready = undefined;
    }
    if (!this.headerDone || this.bytes === 0) {
      this.emitReady();
      return;
    }
    if (ready || afterBig || this.media() >= this.o.chunkMs / 2000) this.flush();
    else if (!this.alarm.armed) this.alarm.at(this.since + this.o.chunkMs);
  }

  private noteBatch(u: Unit): void {
    if (u.start === undefined || u.end === undefined) return;
    if (this.batchFrom === undefined) {
      this.batchFrom = u.start;
      this.batchTo = u.end;
    } else this.batchTo = Math.max(this.batchTo, u.end);
  }

  /** Ends this batch's media count: true when it carries media and the last batch with media before
   * it held half of chunkMs (this one's size is kept for the next). */
  private endBatch(): boolean {
    if (this.batchFrom === undefined) return false;
    const before = this.bigPieces;
    this.bigPieces = this.batchTo - this.batchFrom >= this.o.chunkMs / 2000;
    this.batchFrom = undefined;
    return before;
  }

  /** Sends what is pending now (never before the headers are complete). */
  flush(): void {
    this.alarm.clear();
    this.emitReady();
    if (this.bytes === 0 || !this.headerDone) return;
    this.cut();
    this.emitReady();
  }

  close(): void {
    this.alarm.clear();
    this.ready = undefined;
    this.batchFrom = undefined;
    this.reset();
  }

  /** Makes the pending bytes the ready frame (sending the one before it). */
  private cut(): void {
    this.emitReady();
    const start = this.start ?? this.cursor;
    const end = Math.max(this.end ?? start, start);
    this.ready = { parts: this.parts, bytes: this.bytes, start, end, coalesced: this.units > 1 };
    this.parts = [];
    this.reset();
    this.cursor = Math.max(this.cursor, end);
  }

  private emitReady(): void {
    const ready = this.ready;
    if (!ready) return;
    const bytes = ready.parts.length === 1 ? ready.parts[0] : joined(ready.parts, ready.bytes);
    this.ready = undefined;
    this.o.emit({ bytes, start: ready.start, end: ready.end }, false, ready.coalesced);
  }

  private media(): number {
    return this.start !== undefined && this.end !== undefined ? this.end - this.start : 0;
  }

  /** Cuts maxFrameBytes off the pending bytes (a unit bigger than a frame), media time interpolated.
   * Only the cut frame's own bytes are copied, and only when it spans parts: a 16 MiB unit is cut
   * in views of itself, not re-copied whole for every frame. */
  private splitHead(): void {
    const max = this.o.maxFrameBytes;
    let n = 0,
      have = 0;
    while (have + this.parts[n].length <= max) have += this.parts[n++].length;
    const cut = this.parts[n],
      inCut = max - have;
    this.emitReady();
    const pieces = this.parts.slice(0, n);
    if (inCut > 0) pieces.push(cut.subarray(0, inCut));
    const head = pieces.length === 1 ? pieces[0] : joined(pieces, max);
    this.parts.splice(0, n + 1, cut.subarray(inCut));
    const start = this.start ?? this.cursor;
    const end = this.end ?? start;
    const at = start + ((end - start) * max) / this.bytes;
    this.bytes -= max;
    this.units = 1;
    this.start = this.end === undefined ? undefined : at;
    this.cursor = Math.max(this.cursor, at);
    this.o.emit({ bytes: head, start, end: at }, true, false);
  }

  private reset(): void {
    this.parts.length = 0;
    this.units = 0;
    this.bytes = 0;
    this.start = undefined;
    this.end = undefined;
  }
}
