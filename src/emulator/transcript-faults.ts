// Which upstream sessions the transcript faults reach (types.ts, FaultSwitches: stopTranscribing,
// interimsOnly, dropFinals). Switching one on reaches the transcribing sessions live at that moment,
// oldest first, then each new one as its config is accepted, until `sessions` of them are reached
// (all of them without it); switching it off (null) or anew releases those it reached. Each fault's
// counts start from zero when it is switched on.
import type { TranscriptGate } from './transcript-gate.js';
import type { DropFinals, MediaRange, StopTranscribing, TranscriptFaultCounts } from './types.js';

export type TranscriptFaultName = 'stopTranscribing' | 'interimsOnly' | 'dropFinals';
type Fault = StopTranscribing | DropFinals;

/** Ranges a dropFinals fault may list (a test's, but every list has a bound). */
const MAX_RANGES = 1000;

export function zeroCounts(): TranscriptFaultCounts {
  return { stoppedSessions: 0, interimsOnlySessions: 0, withheldFinals: 0, droppedFinals: 0 };
}

function check(name: TranscriptFaultName, f: unknown): asserts f is Fault {
  const o = f as Partial<StopTranscribing & DropFinals>;
  const count = (x: unknown) => x === undefined || (Number.isInteger(x) && (x as number) >= 0);
  const seconds = (x: unknown) => x === undefined || (typeof x === 'number' && x >= 0);
  const ranges = (x: unknown) =>
    Array.isArray(x) &&
    x.length <= MAX_RANGES &&
    x.every((r) => Array.isArray(r) && r.length === 2 && r.every((t) => typeof t === 'number') && r[0] <= r[1]);
  const ok =
    typeof o === 'object' &&
    o !== null &&
    count(o.sessions) &&
    (name === 'dropFinals' ? ranges(o.ranges) : seconds(o.afterMediaSeconds));
  if (!ok) throw new TypeError(`emulator: faults.${name} is not valid: ${JSON.stringify(f)}`);
}

export class TranscriptFaultBoard {
  readonly counts = zeroCounts();
  private readonly faults = new Map<TranscriptFaultName, Fault>();
  private readonly reached = new Map<TranscriptFaultName, Set<TranscriptGate>>();
  private readonly taken = new Map<TranscriptFaultName, number>();

  /** The fault switched to `f` (null: off); `live`: the transcribing sessions' gates, oldest first. */
  set(name: TranscriptFaultName, f: Fault | null, live: Iterable<TranscriptGate>): void {
    if (f !== null) check(name, f);
    for (const gate of this.reached.get(name) ?? []) apply(name, gate, null, false);
    this.reached.set(name, new Set());
    this.taken.set(name, 0);
    if (f === null) return void this.faults.delete(name);
    // A copy: the test's object changing later does not change the fault.
    const ranges = (f as DropFinals).ranges?.map(([a, b]): MediaRange => [a, b]);
    this.faults.set(name, ranges ? { ...f, ranges } : { ...f });
    this.zero(name);
    for (const gate of live) this.offer(name, gate, true);
  }

  /** A session began transcribing (its config accepted): the faults with room left reach it. */
  join(gate: TranscriptGate): void {
    for (const name of this.faults.keys()) this.offer(name, gate, false);
  }

  /** A session closed. */
  leave(gate: TranscriptGate): void {
    for (const set of this.reached.values()) set.delete(gate);
  }

  resetCounts(): void {
    Object.assign(this.counts, zeroCounts());
  }

  private offer(name: TranscriptFaultName, gate: TranscriptGate, live: boolean): void {
    const f = this.faults.get(name)!;
    const taken = this.taken.get(name) ?? 0;
    if (f.sessions !== undefined && taken >= f.sessions) return;
    this.taken.set(name, taken + 1);
    this.reached.get(name)!.add(gate);
    apply(name, gate, f, live);
  }

  private zero(name: TranscriptFaultName): void {
    if (name === 'stopTranscribing') this.counts.stoppedSessions = 0;
    else if (name === 'interimsOnly') Object.assign(this.counts, { interimsOnlySessions: 0, withheldFinals: 0 });
    else this.counts.droppedFinals = 0;
  }
}

/** `f` on one session (null: off). Without afterMediaSeconds, a live session from its media now, a new one from 0. */
function apply(name: TranscriptFaultName, gate: TranscriptGate, f: Fault | null, live: boolean): void {
  if (name === 'dropFinals') return gate.dropFinals(f ? (f as DropFinals).ranges : null);
  const from = f ? ((f as StopTranscribing).afterMediaSeconds ?? (live ? gate.media : 0)) : null;
  if (name === 'stopTranscribing') gate.stopTranscribing(from);
  else gate.interimsOnly(from);
}
