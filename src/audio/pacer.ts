// Releases frames no faster than `pace` × real time by media time: the frame starting at media
// time m goes out at t0 + m/pace - LEAD_MS. t0 is when the stream's first bytes arrived (start()),
// not when the first frame went out: the first frame waits for the headers and a chunk of media, and
// counting from its release would delay every later frame of a real-time client by that wait. Frames
// already due go out at once, so a real-time client sees no added delay. A frame may also go once it
// ends no further past the first frame's end than real time has run: a recorder's pieces arrive at
// their media's end, so by its start a piece shorter than the first (the last) would wait.
import type { Frame } from './rechunk.js';
import { Alarm, type Scheduler } from './scheduler.js';

/** How far ahead of real time a stream may run. A live recorder's first piece arrives at the end
 * of its media, so a real-time client is exactly on schedule with no slack: a first piece late by
 * some jitter (the network, the event loop during a burst of new sessions) would otherwise hold every
 * later piece of the session by that much, for the whole session. 100 ms absorbs such jitter and is
 * far inside the upstream's tolerance (a 9 s burst still spreads over 8.5 s). */
export const LEAD_MS = 100;

export class Pacer {
  private queue: Frame[] = [];
  private queued = 0;
  private t0: number | undefined;
  private origin = 0;
  private firstEnd = 0;
  private started = false;
  private alarm: Alarm;
  private idleWaiters: Array<() => void> = [];
  private hurried = false;

  constructor(private o: { pace: number; scheduler: Scheduler; emit(frame: Frame): void }) {
    this.alarm = new Alarm(o.scheduler, () => this.release());
  }

  get bufferedBytes(): number {
    return this.queued;
  }

  /** The stream's first bytes arrived now. */
  start(): void {
    this.t0 ??= this.o.scheduler.clock.now();
  }

  push(f: Frame): void {
    this.queue.push(f);
    this.queued += f.bytes.length;
    if (!this.alarm.armed) this.release();
  }

  /** Resolves once every queued frame has been emitted. */
  idle(): Promise<void> {
    if (this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** From now on frames go out as soon as they come (the gateway is draining). */
  hurry(): void {
    this.hurried = true;
    this.alarm.clear();
    this.release();
  }

  /** Drops the queued frames (a session ends, or a replay carries them); pacing goes on for what comes
   *  next, counted from the next frame: frames a replay carried may have come late (what a client
   *  queued while it reconnected, sent at once), and a pace set by them would hold every later frame
   *  of the session by as much. */
  close(): void {
    this.alarm.clear();
    this.queue = [];
    this.queued = 0;
    this.started = false;
    this.t0 = undefined;
    this.wakeIdle();
  }

  private due(f: Frame): number {
    const media = Math.min(f.start - this.origin, f.end - this.firstEnd);
    return (this.t0 as number) + (media / this.o.pace) * 1000 - LEAD_MS;
  }

  private release(): void {
    while (this.queue.length > 0) {
      const f = this.queue[0];
      const now = this.o.scheduler.clock.now();
      this.t0 ??= now;
      if (!this.started) {
        this.started = true;
        this.origin = f.start;
        this.firstEnd = f.end;
      }
      const wait = this.hurried ? 0 : this.due(f) - now;
      if (wait > 0) {
        this.alarm.at(now + wait);
        return;
      }
      this.queue.shift();
      this.queued -= f.bytes.length;
      this.o.emit(f);
      if (this.alarm.armed) return; // emit() re-entered us and left the rest waiting
    }
    this.wakeIdle();
  }

  private wakeIdle(): void {
    const w = this.idleWaiters;
    this.idleWaiters = [];
    for (const r of w) r();
  }
}
