// Speech or not from a frame's level (CELT frames: their coarse band energies, 0-4 kHz): above the
// noise floor by a margin, and above an absolute level. The floor is the lowest level of the last
// few seconds (minimum statistics, kept as one minimum per 100 ms), so a steady room noise, a fan or
// a hum becomes the floor within that window and is not speech, at any level.

export interface LevelOptions {
  /** dB above the floor a frame's level must be to be speech. */
  marginDb: number;
  /** Seconds the floor looks back. */
  floorSeconds: number;
  /** Levels below this are never speech (dB on the detector's scale: pink noise at X dBFS reads about X + 76). */
  minLevelDb: number;
}

const SLOT_SECONDS = 0.1;

export class LevelFloor {
  private readonly slots: Float64Array;
  private slot = 0;
  private slotFill = 0; // seconds in the current slot
  private filled = 0; // slots that hold a level
  private pastMin = Infinity; // lowest level of the slots before the current one

  constructor(private readonly o: LevelOptions) {
    this.slots = new Float64Array(Math.max(1, Math.round(o.floorSeconds / SLOT_SECONDS))).fill(Infinity);
  }

  reset(): void {
    this.slots.fill(Infinity);
    this.slot = 0;
    this.slotFill = 0;
    this.filled = 0;
    this.pastMin = Infinity;
  }

  /** One frame's level (dB) over `seconds`: true when it is speech. */
  frame(levelDb: number, seconds: number): boolean {
    const floor = Math.min(this.pastMin, this.slots[this.slot]);
    if (levelDb < this.slots[this.slot]) this.slots[this.slot] = levelDb;
    this.slotFill += seconds;
    if (this.slotFill >= SLOT_SECONDS) {
      this.slotFill -= SLOT_SECONDS;
      this.slot = (this.slot + 1) % this.slots.length;
      this.slots[this.slot] = Infinity;
      if (this.filled < this.slots.length) this.filled++;
      this.pastMin = Infinity;
      for (let i = 0; i < this.slots.length; i++) if (this.slots[i] < this.pastMin) this.pastMin = this.slots[i];
    }
    // Until the window holds a few slots the floor is not known: no speech on a guess.
    if (this.filled < 2) return false;
    return levelDb >= this.o.minLevelDb && levelDb >= floor + this.o.marginDb;
  }
}
