// What a session bills for its media: `usage` at the end (all of it) and `delta_usage` at each
// flush (what came since the previous flush), unless the usageCredits switch sets the figure.
import { credits } from './messages.js';
import type { FaultSwitches } from './types.js';

export class UsageMeter {
  /** credits of the media up to the last flush */
  private credited = 0;

  constructor(
    private creditsPerSecond: number,
    private faults: FaultSwitches,
  ) {}

  /** The credits of `mediaSeconds` of media in all. */
  total(mediaSeconds: number): number {
    return this.faults.usageCredits ?? credits(mediaSeconds, this.creditsPerSecond);
  }

  /** The credits since the last flush, now that media reached `mediaSeconds`; the next delta counts from here. */
  delta(mediaSeconds: number): number {
    const total = credits(mediaSeconds, this.creditsPerSecond);
    const delta = this.faults.usageCredits ?? Math.round((total - this.credited) * 10_000) / 10_000;
    this.credited = total;
    return delta;
  }
}
