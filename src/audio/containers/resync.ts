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
  /** Does the queue's head continue the stream? The bytes before the gap may have ended inside a
   * unit whose rest was lost, so this looks past that unit (e.g. at the next unit's header). */
  head(b: Buffer): Verdict;
  /** Is a boundary the stream can restart from at `off` (a WebM Cluster, an Ogg page with its CRC)? */
  at(b: Buffer, off: number): Verdict;
}

export class Resync {
  /** Input bytes dropped after gaps so far. */
  skipped = 0;
  private state: 'off' | 'head' | 'scan' = 'off';

  constructor(private checks: Checks) {}

  /** The bytes that follow may not continue the ones queued. A gap during a scan: scan on. */
  gap(): void {
    if (this.state === 'off') this.state = 'head';
  }

  /** True when the queue's head may be parsed: no gap pending, or a verified boundary (bytes in
   * front of it dropped and counted); false while more bytes are needed to find one. */
  ready(q: ByteQueue): boolean {
    if (this.state === 'off') return true;
    if (q.length === 0) return false;
    const b = q.peek(q.length);
    if (this.state === 'head') {
      const v = this.checks.head(b);
      if (v === 'more') return false;
      this.state = v === 'yes' ? 'off' : 'scan';
      if (v === 'yes') return true;
    }
    // Candidates ruled out are dropped at once, so a wait costs one candidate's check a push.
    for (let off = 0; off < b.length; off++) {
      const v = this.checks.at(b, off);
      if (v === 'no') continue;
      this.drop(q, off);
      if (v === 'more') return false;
      this.state = 'off';
      return true;
    }
    this.drop(q, b.length);
    return false;
  }

  private drop(q: ByteQueue, n: number): void {
    q.take(n);
    this.skipped += n;
  }
}
