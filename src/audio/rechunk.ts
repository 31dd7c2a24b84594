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

/** The first n of `parts` (n ≥ 1) as one buffer of `bytes`: a view when they lie end to end in
 * memory (the units of one client message, the usual case: a browser piece is one WebM Cluster),
 * else a copy. Same bytes either way; units are never written to after they are made. */
function joined(parts: Buffer[], n: number, bytes: number): Buffer {
  const first = parts[0];
  if (n === 1) return first;
  let next = first.byteOffset + first.length;
  for (let i = 1; i < n; i++) {
    const b = parts[i];
    if (b.buffer !== first.buffer || b.byteOffset !== next) return Buffer.concat(parts.slice(0, n), bytes);
    next += b.length;
  }
  return Buffer.from(first.buffer, first.byteOffset, bytes);
}

const EMPTY = Buffer.alloc(0);

/** A frame's unit bytes, in an array kept for the session with a count: a new array per frame
 * would live until the next piece and so be promoted by V8 (emptying an array with `length = 0`
 * gives its room back too). */
class Parts {
  private list: Buffer[] = [];
  count = 0;
  bytes = 0;

  push(b: Buffer): void {
    this.list[this.count++] = b;
    this.bytes += b.length;
  }

  at(i: number): Buffer {
    return this.list[i];
  }

  /** Appends `other`'s parts (other is left as it is). */
  append(other: Parts): void {
    for (let i = 0; i < other.count; i++) this.push(other.list[i]);
  }

  /** The first n parts (all of them if not given), as a list of their own. */
  slice(n = this.count): Buffer[] {
    return this.list.slice(0, n);
  }

  /** All the parts as one buffer. */
  joined(): Buffer {
    return joined(this.list, this.count, this.bytes);
  }

  /** Lets go of the parts (the array keeps its room). */
  clear(): void {
    for (let i = 0; i < this.count; i++) this.list[i] = EMPTY;
    this.count = 0;
    this.bytes = 0;
  }
}

export class Rechunker {
  /** the pending frame's unit bytes */
  private parts = new Parts();
  private units = 0;
  private start: number | undefined; // media start of the pending frame
  private end: number | undefined;
  private cursor = 0; // media time emitted so far
  private headerDone = false;
  private since = 0; // clock time the pending frame's first bytes came
  private alarm: Alarm;
  /** The frame cut in this batch, if any (parts in `ready`), joined only when it goes: a tail may join it. */
  private ready = new Parts();
  private readyStart = 0;
  private readyEnd = 0;
  private readyCoalesced = false;
  private batchFrom: number | undefined; // media of this batch's units
  private batchTo = 0;
  /** The last batch with media held half of chunkMs or more. */
  private bigPieces = false;

  constructor(private o: RechunkerOptions) {
    this.alarm = new Alarm(o.scheduler, () => this.flush());
  }

  get bufferedBytes(): number {
    return this.parts.bytes + this.ready.bytes;
  }

  add(u: Unit): void {
    if (!u.header && !this.headerDone) {
      this.headerDone = true; // the pending bytes are now the complete headers
      this.since = this.o.scheduler.clock.now(); // media may start long after them
    }
    if (this.headerDone && this.parts.bytes > 0) {
      if (this.parts.bytes + u.bytes.length > this.o.maxFrameBytes) this.cut();
      else if (u.end !== undefined && u.start !== undefined && this.start !== undefined && this.end !== undefined) {
        // Stop before a unit that takes the frame further from chunkMs than it is now.
        const target = this.o.chunkMs / 1000;
        const now = this.end - this.start,
          next = u.end - this.start;
        if (Math.abs(next - target) > Math.abs(now - target) && now > 0) this.cut();
      }
    }
    if (this.parts.bytes === 0) this.since = this.o.scheduler.clock.now();
    this.parts.push(u.bytes);
    this.units++;
    if (u.start !== undefined && this.start === undefined) this.start = u.start;
    if (u.end !== undefined) this.end = Math.max(this.end ?? u.end, u.end);
    this.noteBatch(u);
    while (this.parts.bytes > this.o.maxFrameBytes) this.splitHead();
    if (this.headerDone && this.media() >= this.o.chunkMs / 1000) this.cut();
  }

  /** A batch of input ends here (no more units until the next client message): the pending frame
   * goes if it holds half of chunkMs or the batch before did, else it waits for more until chunkMs
   * after its first bytes. */
  batchEnd(): void {
    const afterBig = this.endBatch();
    const ready = this.ready.count > 0;
    if (
      ready &&
      this.parts.bytes > 0 &&
      this.media() < this.o.chunkMs / 2000 &&
      this.ready.bytes + this.parts.bytes <= this.o.maxFrameBytes
    ) {
      // A short tail joins the frame cut before it: the ready parts, then the tail's, are pending.
      this.ready.append(this.parts);
      this.parts.clear();
      [this.parts, this.ready] = [this.ready, this.parts];
      this.units++; // the ready frame's units: the merged frame is coalesced
      this.start = this.readyStart;
      this.end = Math.max(this.end ?? this.readyEnd, this.readyEnd);
    }
    if (!this.headerDone || this.parts.bytes === 0) {
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
    if (this.parts.bytes === 0 || !this.headerDone) return;
    this.cut();
    this.emitReady();
  }

  close(): void {
    this.alarm.clear();
    this.ready.clear();
    this.batchFrom = undefined;
    this.reset();
  }

  /** Makes the pending bytes the ready frame (sending the one before it). */
  private cut(): void {
    this.emitReady(); // the ready parts are empty now: they take the pending ones' place
    const start = this.start ?? this.cursor;
    const end = Math.max(this.end ?? start, start);
    [this.ready, this.parts] = [this.parts, this.ready];
    this.readyStart = start;
    this.readyEnd = end;
    this.readyCoalesced = this.units > 1;
    this.reset();
    this.cursor = Math.max(this.cursor, end);
  }

  private emitReady(): void {
    if (this.ready.count === 0) return;
    const bytes = this.ready.joined();
    this.ready.clear();
    this.o.emit({ bytes, start: this.readyStart, end: this.readyEnd }, false, this.readyCoalesced);
  }

  private media(): number {
    return this.start !== undefined && this.end !== undefined ? this.end - this.start : 0;
  }

  /** Cuts maxFrameBytes off the pending bytes (a unit bigger than a frame), media time interpolated.
   * Only the cut frame's own bytes are copied, and only when it spans parts: a 16 MiB unit is cut
   * in views of itself, not re-copied whole for every frame. */
  private splitHead(): void {
    const max = this.o.maxFrameBytes,
      parts = this.parts,
      bytes = parts.bytes;
    let n = 0,
      have = 0;
    while (have + parts.at(n).length <= max) have += parts.at(n++).length;
    const cut = parts.at(n),
      inCut = max - have;
    this.emitReady();
    const pieces = parts.slice(n);
    if (inCut > 0) pieces.push(cut.subarray(0, inCut));
    const head = joined(pieces, pieces.length, max);
    const rest = parts.slice();
    parts.clear();
    parts.push(cut.subarray(inCut));
    for (let i = n + 1; i < rest.length; i++) parts.push(rest[i]);
    const start = this.start ?? this.cursor;
    const end = this.end ?? start;
    const at = start + ((end - start) * max) / bytes;
    this.units = 1;
    this.start = this.end === undefined ? undefined : at;
    this.cursor = Math.max(this.cursor, at);
    this.o.emit({ bytes: head, start, end: at }, true, false);
  }

  private reset(): void {
    this.parts.clear();
    this.units = 0;
    this.start = undefined;
    this.end = undefined;
  }
}
