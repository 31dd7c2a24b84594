// A session's client flushes, coalesced: at most one flush is pending upstream at a time. A client
// flush while one is pending joins it when no audio came in between (one upstream answer covers
// both), else it waits for the next upstream flush, sent once the pending one is answered. Each
// client flush still gets its own `flushed` then `delta_usage`, in order: the upstream's one answer
// is relayed for the first, and the others get `flushed` and a `delta_usage` of 0 credits. Counts,
// not queues: a flood of flushes costs a few integers, and past MAX_UNANSWERED_FLUSHES the client is
// refused (told once per pending answer, so the refusals cannot flood its socket either).

/** Client flushes waiting for an answer, at most; more are refused (TOO_MANY_FLUSHES). */
export const MAX_UNANSWERED_FLUSHES = 1000;

export interface FlushGateActions {
  /** Queue one flush for the upstream, behind the audio received so far. */
  sendUpstream(): void;
  /** Answer one coalesced client flush: `flushed`, then `delta_usage` of 0 credits. */
  answer(): void;
  /** Tell the client its flushes are refused until the pending one is answered. */
  refuse(): void;
}

export class FlushGate {
  /** [client flushes the pending upstream flush answers, client flushes waiting for the next one] */
  private readonly groups: number[] = [];
  /** the second group's flush already went upstream (an `end` does not wait for the first answer) */
  private nextSent = false;
  /** client audio came after the last group's flush was asked */
  private audioSince = false;
  /** the refusal was told since the last answer */
  private refused = false;
  /** `flushed` relayed: client flushes its `delta_usage` still answers (the first gets the upstream's) */
  private answering = 0;

  constructor(private readonly act: FlushGateActions) {}

  /** A client flush, with the session able to send it upstream. */
  ask(): void {
    if (this.unanswered >= MAX_UNANSWERED_FLUSHES) {
      if (!this.refused) this.act.refuse();
      this.refused = true;
      return;
    }
    const last = this.groups.length - 1;
    // The pending flush covers this one if no audio came since; a waiting one covers it in any case.
    const joins = last === 0 ? !this.audioSince : last === 1 && !this.nextSent;
    if (joins) {
      this.groups[last]++;
      return;
    }
    this.groups.push(1);
    this.audioSince = false;
    if (this.groups.length === 1) this.launch();
  }

  /** Client audio went on towards the upstream. */
  audio(): void {
    if (this.groups.length > 0) this.audioSince = true;
  }

  /** `end` is about to be queued: a waiting flush goes before it. */
  beforeEnd(): void {
    if (this.groups.length < 2 || this.nextSent) return;
    this.nextSent = true;
    this.launch();
  }

  /** After each upstream message is relayed: `flushed` answers the pending group (its `delta_usage`,
   *  next, brings the coalesced flushes' answers); any other message settles what is owed. */
  relayed(type: string | undefined): void {
    if (type === 'flushed') this.flushed();
    else this.settle();
  }

  /** The pending group is answered; the next group's flush is sent. */
  private flushed(): void {
    this.settle();
    this.answering = this.groups.shift() ?? 0;
    this.refused = false;
    if (this.groups.length > 0 && !this.nextSent) this.launch();
    this.nextSent = false;
    if (this.groups.length === 0) this.audioSince = false;
  }

  /** The coalesced flushes of the last answered group get theirs. */
  private settle(): void {
    for (let n = this.answering - 1; n > 0; n--) this.act.answer();
    this.answering = 0;
  }

  /** The flush goes behind every piece of audio received so far. */
  private launch(): void {
    this.audioSince = false;
    this.act.sendUpstream();
  }

  private get unanswered(): number {
    return this.groups.reduce((t, n) => t + n, 0);
  }
}
