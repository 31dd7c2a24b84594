// What the emulator remembers of past sessions, bounded so that a long-running `npm start` stays
// small: the most recent session records, and a total of kept audio bytes (the oldest records
// lose their audio first, and say so in `audioDropped`).
import type { SessionRecord } from './session-record.js';

/** Most entries kept in the emulator's logs (violations, token requests). */
export const MAX_LOG_ENTRIES = 1000;

/** Appends `item`, dropping the oldest entries beyond `max`. */
export function pushRecent<T>(list: T[], item: T, max: number): void {
  list.push(item);
  if (list.length > max) list.splice(0, list.length - max);
}

export class SessionWindow {
  /** Oldest first: the array the emulator exposes as `sessions`. */
  readonly records: SessionRecord[] = [];
  private audioBytes = 0;

  constructor(
    private readonly maxRecords: number,
    private readonly maxAudioBytes: number,
  ) {}

  add(record: SessionRecord): void {
    this.records.push(record);
    const over = this.records.length - this.maxRecords;
    // A record that leaves the window forgets its audio, even if its session still runs.
    if (over > 0) for (const old of this.records.splice(0, over)) this.audioBytes -= old.dropAudio();
  }

  /** A record kept `bytes` more audio: the oldest records' audio goes until the total fits. */
  kept(bytes: number): void {
    this.audioBytes += bytes;
    for (const r of this.records) {
      if (this.audioBytes <= this.maxAudioBytes) return;
      if (r.keptAudioBytes > 0) this.audioBytes -= r.dropAudio();
    }
  }
}
