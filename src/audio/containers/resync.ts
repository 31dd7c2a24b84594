// After a gap in the input (a client that came back may have lost bytes in flight), a parser drops
// input up to a boundary it can verify, so that a unit cut in the middle never goes upstream.
import type { ByteQueue } from './byte-queue.js';

/** Whether a boundary is at an offset: yes, no, or more bytes are needed to tell. */
export type Verdict = 'yes' | 'no' | 'more';

/** 'no' unless the bytes from `off` could still begin with `prefix` (then 'more'). */
export function prefixVerdict(b: Buffer, off: number, prefix: Buffer): Verdict {
  const n = Math.min(prefix.length, b.length - off);
  return b.compare(prefix, 0, n, off, off + n) === 0 ? 'more' : 'no';
}

export interface Checks {
  /** Does the queue's head continue the stream? The bytes before the gap (the first `gapAt`) may
   * have ended inside a unit whose rest was lost, so this looks past that unit (e.g. at the next
   * unit's header). `paused`: the input pauses here (a flush, the end), so what follows that unit
   * may never come: a whole, plausible unit that is all the queue holds is taken. */
  head(b: Buffer, gapAt: number, paused?: boolean): Verdict;
  /** Is a boundary the stream can restart from at `off` (a WebM Cluster, an Ogg page with its CRC)? */
  at(b: Buffer, off: number): Verdict;
}

export class Resync {
  /** Input bytes dropped after gaps so far. */
  skipped = 0;
  private state: 'off' | 'head' | 'scan' = 'off';
  /** After a check needed more bytes: the queue length to wait for before checking again. It grows
   * with the queue, so a client sending a byte at a time costs linear time, not quadratic. */
  private waitFor = 0;
  /** Bytes of the queue that came before the gap. */
  private gapAt = 0;

  constructor(private checks: Checks) {}

  /** The parser found the bytes after a gap do not continue its stream after all (`n` of them, taken
   * from the queue): it drops input up to the next boundary. */
  scan(n: number): void {
    this.skipped += n;
    this.state = 'scan';
    this.waitFor = 0;
  }

  /** Input is being dropped or checked after a gap (the parser's position is not known). */
  get active(): boolean {
    return this.state !== 'off';
  }

  /** The bytes that follow may not continue the ones queued in `q`. A gap during a scan: scan on. */
  gap(q: ByteQueue): void {
    if (this.state === 'off') this.state = 'head';
    this.gapAt = q.length;
    this.waitFor = 0;
  }

  /** True when the queue's head may be parsed: no gap pending, or a verified boundary (bytes in
   * front of it dropped and counted); false while more bytes are needed to find one. */
  ready(q: ByteQueue): boolean {
    if (this.state === 'off') return true;
    if (q.length === 0 || q.length < this.waitFor) return false;
    let b = q.peek(q.length);
    if (this.state === 'head') {
      const v = this.checks.head(b, this.gapAt);
      if (v === 'more') return this.wait(q);
      this.state = v === 'yes' ? 'off' : 'scan';
      if (v === 'yes') return true;
      // The unit at the head is the one the gap cut (its own header may still look whole).
      this.drop(q, 1);
      if (q.length === 0) return false;
      b = q.peek(q.length);
    }
    // Candidates ruled out are dropped at once, so a wait costs one candidate's check a push.
    for (let off = 0; off < b.length; off++) {
      const v = this.checks.at(b, off);
      if (v === 'no') continue;
      this.drop(q, off);
      if (v === 'more') return this.wait(q);
      this.state = 'off';
      return true;
    }
    this.drop(q, b.length);
    return false;
  }

  /** The input pauses (a client's flush or end): a head check that waits only for what follows the
   * head's unit is decided without it, else the last unit a client sends after a gap (a handover's
   * seam just before its end) would wait for ever. True when the queue's head may be parsed. */
  pause(q: ByteQueue): boolean {
    if (this.state !== 'head' || q.length === 0) return this.state === 'off';
    if (this.checks.head(q.peek(q.length), this.gapAt, true) !== 'yes') return false;
    this.state = 'off';
    return true;
  }

  private wait(q: ByteQueue): false {
    this.waitFor = q.length + Math.max(64, q.length >> 3);
    return false;
  }

  private drop(q: ByteQueue, n: number): void {
    q.take(n);
    this.skipped += n;
  }
}
