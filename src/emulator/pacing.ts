// The pacing rule the emulator enforces on its clients: after the first 2 s of media, audio must
// not arrive faster than 1.5x real time averaged over any 5 s of media. Pure: arrival times come
// from the caller, so it is testable with a fake clock.

export const PACING = { graceSeconds: 2, windowSeconds: 5, maxRate: 1.5 } as const;

export class PacingCheck {
  /** (media seconds, arrival ms) after the grace period, oldest first. */
  private points: Array<{ m: number; t: number }> = [];
  private reported = false;

  /** Records that media reached `mediaSeconds` at `tMs`; returns a violation text once, else null. */
  record(mediaSeconds: number, tMs: number): string | null {
    if (mediaSeconds < PACING.graceSeconds) return null;
    this.points.push({ m: mediaSeconds, t: tMs });
    // Latest earlier point at least one window of media back.
    let i = -1;
    for (let k = this.points.length - 2; k >= 0; k--) {
      if (this.points[k].m <= mediaSeconds - PACING.windowSeconds) {
        i = k;
        break;
      }
    }
    if (i < 0) return null;
    const from = this.points[i];
    this.points = this.points.slice(i); // older points can never be the latest window start again
    const media = mediaSeconds - from.m;
    const wall = (tMs - from.t) / 1000;
    const rate = wall > 0 ? media / wall : Infinity;
    if (rate <= PACING.maxRate || this.reported) return null;
    this.reported = true;
    return (
      `pacing: ${media.toFixed(2)} s of media (from ${from.m.toFixed(2)} s) arrived in ${wall.toFixed(2)} s, ` +
      `${rate === Infinity ? 'instantly' : rate.toFixed(2) + 'x real time'} (max ${PACING.maxRate}x)`
    );
  }
}
