// A session's named timers on an injected clock: tests drive them with a fake one, and every timer
// dies with the session (clearAll).

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout),
};

export class Timers<Name extends string> {
  private readonly running = new Map<Name, unknown>();

  constructor(private readonly clock: Clock) {}

  /** (Re)starts `name`: `fire` runs once after `ms` unless it is cleared first. */
  start(name: Name, ms: number, fire: () => void): void {
    this.clear(name);
    this.running.set(
      name,
      this.clock.setTimeout(() => {
        this.running.delete(name);
        fire();
      }, ms),
    );
  }

  clear(name: Name): void {
    const t = this.running.get(name);
    if (t !== undefined) this.clock.clearTimeout(t);
    this.running.delete(name);
  }

  has(name: Name): boolean {
    return this.running.has(name);
  }

  clearAll(): void {
    for (const t of this.running.values()) this.clock.clearTimeout(t);
    this.running.clear();
  }
}
