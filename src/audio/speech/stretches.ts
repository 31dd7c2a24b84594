// Speech decisions per frame → speech stretches. A stretch opens on an unbroken run of speech frames
// of at least the onset (a click, or a noise frame here and there, opens none); once open, it goes
// on across pauses shorter than the bridge (the pauses between words are not silence). The list is a ring of fixed size: the oldest stretches leave it (their seconds stay
// counted), so a session of any length holds the same memory.

export interface StretchOptions {
  /** Pauses shorter than this join two runs of speech into one stretch (seconds). */
  bridgeSeconds: number;
  /** Seconds of unbroken speech frames that open a stretch. */
  onsetSeconds: number;
  /** Stretches kept for stretch()/speechBetween(); older ones leave the list. */
  maxStretches: number;
}

export class Stretches {
  private readonly starts: Float64Array;
  private readonly ends: Float64Array;
  private head = 0; // index of the oldest kept stretch
  private kept = 0;
  /** Seconds of speech of every stretch so far, those that left the list included. */
  private closedSeconds = 0;
  // The run being built: its start and its last speech frame's end; open once in the list.
  private runStart = -1;
  private runEnd = -1;
  private runInList = false;

  constructor(private readonly o: StretchOptions) {
    this.starts = new Float64Array(o.maxStretches);
    this.ends = new Float64Array(o.maxStretches);
  }

  /** A speech frame [start, end). */
  speech(start: number, end: number): void {
    if (this.runStart >= 0 && !this.runInList && start > this.runEnd + 1e-6) this.runStart = -1; // broken
    if (this.runStart >= 0 && start - this.runEnd >= this.o.bridgeSeconds) this.close();
    if (this.runStart < 0) {
      this.runStart = start;
      this.runInList = false;
    }
    this.runEnd = Math.max(this.runEnd, end);
    if (!this.runInList && this.runEnd - this.runStart >= this.o.onsetSeconds - 1e-6) {
      this.push(this.runStart);
      this.runInList = true;
    }
    if (this.runInList) this.ends[this.last()] = this.runEnd;
  }

  /** A frame without speech ending at `t`: a run not yet open is broken; an open one ends once the bridge has passed. */
  quiet(t: number): void {
    if (this.runStart < 0) return;
    if (!this.runInList || t - this.runEnd >= this.o.bridgeSeconds) this.close();
  }

  /** Seconds of speech so far (the open stretch included). */
  get seconds(): number {
    return this.closedSeconds + (this.runInList ? this.runEnd - this.runStart : 0);
  }

  get count(): number {
    return this.kept;
  }
  /** The i-th kept stretch, oldest first: [start(i), end(i)). */
  start(i: number): number {
    return this.starts[(this.head + i) % this.o.maxStretches];
  }
  end(i: number): number {
    return this.ends[(this.head + i) % this.o.maxStretches];
  }

  /** Speech seconds of the kept stretches inside [from, to). */
  between(from: number, to: number): number {
    let s = 0;
    for (let i = 0; i < this.kept; i++) s += Math.max(0, Math.min(to, this.end(i)) - Math.max(from, this.start(i)));
    return s;
  }

  private close(): void {
    if (this.runInList) this.closedSeconds += this.runEnd - this.runStart;
    this.runStart = -1;
    this.runEnd = -1;
    this.runInList = false;
  }

  private push(start: number): void {
    if (this.kept === this.o.maxStretches) {
      this.head = (this.head + 1) % this.o.maxStretches;
      this.kept--;
    }
    const i = (this.head + this.kept) % this.o.maxStretches;
    this.starts[i] = start;
    this.ends[i] = start;
    this.kept++;
  }

  private last(): number {
    return (this.head + this.kept - 1) % this.o.maxStretches;
  }
}
