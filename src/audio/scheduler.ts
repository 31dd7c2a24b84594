// One timer for every session's partial frames and paced frames: a min-heap of alarms by due time,
// driven by ONE clock timer armed for the earliest. A Node timer (and a closure) per partial or
// paced frame cost thousands of timer objects a second under load; an alarm is one object per
// owner, re-armed in place.
import { logger } from '../telemetry/index.js';
import type { Clock } from './types.js';

export class Scheduler {
  private heap: Alarm[] = [];
  private timer: unknown;
  private timerDue = Infinity;
  private readonly tick = (): void => this.run();

  constructor(readonly clock: Clock) {}

  /** (Re)arms `a` for clock time `due`. */
  set(a: Alarm, due: number): void {
    if (a.slot >= 0) this.remove(a);
    a.due = due;
    a.slot = this.heap.length;
    this.heap.push(a);
    this.up(a.slot);
    this.arm();
  }

  remove(a: Alarm): void {
    const i = a.slot;
    if (i < 0) return;
    a.slot = -1;
    const last = this.heap.pop() as Alarm;
    if (this.heap.length === 0) this.disarm(); // a stale timer could hold a stopping process
    if (last === a) return;
    this.heap[i] = last;
    last.slot = i;
    this.up(i);
    this.down(last.slot);
    // The armed clock timer may now be early; run() re-arms then (cheaper than re-arming here).
  }

  /** Fires every alarm due now (earliest first), then arms the clock timer for the next one. */
  private run(): void {
    this.timer = undefined;
    this.timerDue = Infinity;
    const now = this.clock.now();
    while (this.heap.length > 0 && this.heap[0].due <= now) {
      const a = this.heap[0];
      this.remove(a);
      try {
        a.fire();
      } catch (err) {
        // The owners guard their own work; this keeps one owner's bug from stopping the others'.
        logger.error({ err }, 'audio timer callback failed');
      }
    }
    this.arm();
  }

  private arm(): void {
    if (this.heap.length === 0) return;
    const due = this.heap[0].due;
    if (due >= this.timerDue) return;
    this.disarm();
    this.timerDue = due;
    this.timer = this.clock.setTimeout(this.tick, Math.max(0, Math.ceil(due - this.clock.now())));
  }

  private disarm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerDue = Infinity;
  }

  private up(i: number): void {
    const h = this.heap;
    const a = h[i];
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p].due <= a.due) break;
      h[i] = h[p];
      h[i].slot = i;
      i = p;
    }
    h[i] = a;
    a.slot = i;
  }

  private down(i: number): void {
    const h = this.heap;
    const a = h[i];
    for (;;) {
      let c = 2 * i + 1;
      if (c >= h.length) break;
      if (c + 1 < h.length && h[c + 1].due < h[c].due) c++;
      if (h[c].due >= a.due) break;
      h[i] = h[c];
      h[i].slot = i;
      i = c;
    }
    h[i] = a;
    a.slot = i;
  }
}

/** One owner's timer: at most one pending due time, set and cleared without allocating. */
export class Alarm {
  due = 0;
  slot = -1; // index in the scheduler's heap; -1: not set

  constructor(
    private scheduler: Scheduler,
    readonly fire: () => void,
  ) {}

  get armed(): boolean {
    return this.slot >= 0;
  }

  /** Fires `ms` from now (replacing any earlier setting). */
  in(ms: number): void {
    this.scheduler.set(this, this.scheduler.clock.now() + ms);
  }

  at(due: number): void {
    this.scheduler.set(this, due);
  }

  clear(): void {
    this.scheduler.remove(this);
  }
}

const schedulers = new WeakMap<Clock, Scheduler>();

/** The scheduler of a clock: one per clock, so every session on the real clock shares one timer. */
export function schedulerFor(clock: Clock): Scheduler {
  let s = schedulers.get(clock);
  if (!s) schedulers.set(clock, (s = new Scheduler(clock)));
  return s;
}
