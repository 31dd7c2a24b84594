// The audio one session record keeps: every frame's size, a copy of the first frame, and the frames'
// bytes as a chunk list concatenated on first read (long sessions don't copy their audio on every
// frame). The window the record belongs to bounds how much audio all records keep together.

export interface AudioBudget {
  kept(bytes: number): void;
}

export class KeptAudio {
  readonly frames: number[] = [];
  firstFrame?: Buffer;
  dropped = false;
  bytes = 0;
  private chunks: Buffer[] = [];

  constructor(private budget: AudioBudget) {}

  add(frame: Buffer): void {
    this.frames.push(frame.length);
    this.firstFrame ??= Buffer.from(frame);
    if (this.dropped) return;
    this.chunks.push(frame);
    this.bytes += frame.length;
    this.budget.kept(frame.length);
  }

  get joined(): Buffer {
    // Joined once and kept as the single chunk, so a read does not double the memory held.
    if (this.chunks.length !== 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0];
  }

  /** Forgets the audio and keeps none from now on; returns the bytes freed. */
  drop(): number {
    const freed = this.bytes;
    this.dropped = true;
    this.chunks = [];
    this.bytes = 0;
    return freed;
  }
}
