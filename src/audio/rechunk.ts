// Container units → upstream frames: the first frame holds the complete headers, frames stay
// within maxFrameBytes, cut at unit boundaries where possible, coalesced to about chunkMs of media,
// and a partial frame waits at most chunkMs of wall time.
import type { Unit } from './containers/unit.js';
import type { Clock } from './types.js';

export interface Frame { bytes: Buffer; start: number; end: number }

export interface RechunkerOptions {
  chunkMs: number;
  maxFrameBytes: number;
  clock: Clock;
  emit(frame: Frame, info: { split: boolean; coalesced: boolean }): void;
}

export class Rechunker {
  private parts: Buffer[] = [];
  private units = 0;
  private bytes = 0;
  private start: number | undefined; // media start of the pending frame
  private end: number | undefined;
  private cursor = 0; // media time emitted so far
  private headerDone = false;
  private timer: unknown;

  constructor(private o: RechunkerOptions) {}

  get bufferedBytes(): number { return this.bytes; }

  add(u: Unit): void {
    if (!u.header && !this.headerDone) {
      this.headerDone = true; // the pending bytes are now the complete headers
    }
    if (this.headerDone && this.bytes > 0) {
      if (this.bytes + u.bytes.length > this.o.maxFrameBytes) this.flush();
      else if (u.end !== undefined && u.start !== undefined && this.start !== undefined && this.end !== undefined) {
        // Stop before a unit that takes the frame further from chunkMs than it is now.
        const target = this.o.chunkMs / 1000;
        const now = this.end - this.start, next = u.end - this.start;
        if (Math.abs(next - target) > Math.abs(now - target) && now > 0) this.flush();
      }
    }
    this.parts.push(u.bytes);
    this.units++;
    this.bytes += u.bytes.length;
    if (u.start !== undefined && this.start === undefined) this.start = u.start;
    if (u.end !== undefined) this.end = Math.max(this.end ?? u.end, u.end);
    while (this.bytes > this.o.maxFrameBytes) this.splitHead();
    if (!this.headerDone) return;
    if (this.start !== undefined && this.end !== undefined && this.end - this.start >= this.o.chunkMs / 1000) this.flush();
    else if (this.bytes > 0 && this.timer === undefined) this.timer = this.o.clock.setTimeout(() => { this.timer = undefined; this.flush(); }, this.o.chunkMs);
  }

  /** Sends the pending frame now (never before the headers are complete). */
  flush(): void {
    this.stopTimer();
    if (this.bytes === 0 || !this.headerDone) return;
    const bytes = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.bytes);
    const start = this.start ?? this.cursor;
    const end = Math.max(this.end ?? start, start);
    const coalesced = this.units > 1;
    this.reset();
    this.cursor = Math.max(this.cursor, end);
    this.o.emit({ bytes, start, end }, { split: false, coalesced });
  }

  close(): void {
    this.stopTimer();
    this.reset();
  }

  /** Cuts maxFrameBytes off the pending bytes (a unit bigger than a frame), media time interpolated. */
  private splitHead(): void {
    const all = Buffer.concat(this.parts, this.bytes);
    const max = this.o.maxFrameBytes;
    const head = all.subarray(0, max), rest = all.subarray(max);
    const start = this.start ?? this.cursor;
    const end = this.end ?? start;
    const cut = start + ((end - start) * max) / this.bytes;
    this.parts = [rest];
    this.bytes = rest.length;
    this.units = 1;
    this.start = this.end === undefined ? undefined : cut;
    this.cursor = Math.max(this.cursor, cut);
    this.o.emit({ bytes: head, start, end: cut }, { split: true, coalesced: false });
  }

  private reset(): void {
    this.parts = [];
    this.units = 0;
    this.bytes = 0;
    this.start = undefined;
    this.end = undefined;
  }

  private stopTimer(): void {
    if (this.timer !== undefined) this.o.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
