// Test support: what the upstream emulator saw, and its count of media time.
import { createMediaClock, type Emulator } from '../../src/emulator/index.js';

/** The emulator's violations but pacing: tests run the gateway faster than real time (PACE > 1). */
export const protocolViolations = (emulator: Emulator): string[] =>
  emulator.violations.filter((v) => !/real[- ]time|pac/i.test(v));

/** What the upstream reported for `tenant`: each of its sessions' final usage, or its deltas without one. */
export function upstreamCredits(emulator: Emulator, tenant: string): number {
  let total = 0;
  for (const s of emulator.sessions.filter((x) => x.tenant === tenant)) {
    const sent = s.sent as Array<{ type: string; credits?: number }>;
    const final = sent.find((m) => m.type === 'usage');
    total += final ? final.credits! : sent.filter((m) => m.type === 'delta_usage').reduce((n, m) => n + m.credits!, 0);
  }
  return total;
}

/** Media seconds of a stream's binary frames, in order, as the emulator's media clock counts them. */
export function mediaSeconds(frames: Buffer[]): number {
  const clock = createMediaClock(frames[0]);
  for (const f of frames) clock.add(f);
  return clock.seconds;
}
